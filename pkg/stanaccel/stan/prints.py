"""Where a Stan program's ``print`` statements go: stderr, up to a number of lines per process.

The bridge (``bridge.cpp``) gives every evaluation a stream for Stan's
``print`` (the ``msgs`` of Stan's C++ model) and hands what was written to
:func:`forward`: the ``transformed data`` block's prints when an instance is
built, the ``model`` block's at each log density or gradient, those of
``transformed parameters`` and ``generated quantities`` when a draw is
constrained, and everything Stan's NUTS prints, as it prints it. Prints
made inside Stan's L-BFGS (the mode of a Laplace or Pathfinder warm-up) are
kept in that service's messages instead: Stan mixes them there with its own
rejection notes.

A print in the model block runs at every gradient, thousands of times a
second, so only the first :data:`DEFAULT_LINES` lines of each process are
shown, then one note says how to see more. The environment variable
``STANACCEL_PRINT_LINES`` sets the number: ``all`` for every line, ``0``
for none. Each process counts its own lines (a process executor's workers
write to the same terminal).
"""

from __future__ import annotations

import os
import sys
import threading

LINES_VARIABLE = "STANACCEL_PRINT_LINES"
DEFAULT_LINES = 100
"""Lines of print output shown per process unless ``STANACCEL_PRINT_LINES`` says otherwise."""

_lock = threading.Lock()
_shown = 0
_held_back = 0


def line_limit() -> int | None:
    """The lines of print output to show in this process: ``STANACCEL_PRINT_LINES``, None for all."""
    value = os.environ.get(LINES_VARIABLE, "").strip().lower()
    if value == "all":
        return None
    if value.isdigit():
        return int(value)
    return DEFAULT_LINES


def forward(text: str) -> None:
    """Show what a Stan program printed (one or more lines) on stderr, within the line limit.

    Called by the bridge. Past the limit the lines are counted, not shown,
    and the first line held back brings one note saying so. Never raises:
    debugging output that cannot be written fails no evaluation.
    """
    global _shown, _held_back
    lines = text.splitlines()
    if not lines:
        return
    with _lock:
        limit = line_limit()
        room = len(lines) if limit is None else max(0, min(len(lines), limit - _shown))
        shown, rest = lines[:room], len(lines) - room
        _shown += room
        note = ""
        if rest and not _held_back and limit:
            note = (
                f"stanaccel: the Stan program's print output is limited to its first {limit} lines "
                f"(per process); set {LINES_VARIABLE}=all to see every line, or a number"
            )
        _held_back += rest
        if shown or note:
            _write("\n".join([*shown, note] if note else shown))


def held_back() -> int:
    """Lines of print output this process has not shown (past the limit)."""
    return _held_back


def reset() -> None:
    """Count from zero again: the next lines are shown up to the limit."""
    global _shown, _held_back
    with _lock:
        _shown = _held_back = 0


def _write(block: str) -> None:
    """Write lines to stderr, above any progress bars of this process."""
    try:
        tqdm = sys.modules.get("tqdm")
        if tqdm is not None:
            tqdm.tqdm.write(block, file=sys.stderr)
        else:
            sys.stderr.write(block + "\n")
            sys.stderr.flush()
    except Exception:  # a closed or broken stderr: the output is lost, the run goes on
        pass
