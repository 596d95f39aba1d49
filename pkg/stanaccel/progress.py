"""Progress bars, one per chain, with draws per second and the time left.

A long run should say how far each chain is and when it will end, but not
fill a log file with bar redraws: the bars show only when asked
(``progress=True``) and when the stream is a terminal. The sampler's main
thread polls each chain's count and moves the bars; chains never touch them,
so they run at full speed and a bar never interleaves with another's output.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO


def shows_progress(progress: bool, stream: TextIO | None = None) -> bool:
    """Whether bars should show: asked for, and ``stream`` (stderr by default) is a terminal."""
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(progress) and callable(isatty) and bool(isatty())


class ChainBars:
    """One tqdm bar per chain, ``done`` of ``total`` with its rate and time left; silent when off.

    Parameters
    ----------
    totals : sequence of int
        Each chain's number of iterations (draws, or warm-up and draws).
    label : str
        What is run ("MH", "NUTS"), before each chain's number.
    progress : bool
        Asked for; the bars show only if ``stream`` is a terminal too.
    initial : sequence of int, optional
        What each chain had already done (a run resumed from its checkpoints),
        so the rate and the time left count only what this run does.
    unit : str
        What a chain's count counts ("draw", "it").
    stream : file, optional
        Where the bars go (stderr by default).
    """

    def __init__(
        self,
        totals: Sequence[int],
        label: str,
        progress: bool,
        *,
        initial: Sequence[int] | None = None,
        unit: str = "draw",
        stream: TextIO | None = None,
    ):
        self.bars = []
        if not shows_progress(progress, stream):
            return
        from tqdm import tqdm

        initial = initial if initial is not None else [0] * len(totals)
        for c, (total, start) in enumerate(zip(totals, initial, strict=True)):
            self.bars.append(
                tqdm(
                    total=int(total),
                    initial=int(start),
                    desc=f"{label} chain {c}",
                    unit=unit,
                    position=c,
                    leave=False,
                    file=stream if stream is not None else sys.stderr,
                    dynamic_ncols=True,
                )
            )

    def update(self, counts: Sequence[int]) -> None:
        """Move each chain's bar to its count (counts only grow)."""
        for bar, count in zip(self.bars, counts, strict=False):
            if count > bar.n:
                bar.update(int(count) - bar.n)

    def close(self) -> None:
        """Remove the bars (they are not left on the terminal)."""
        for bar in reversed(self.bars):
            bar.close()
        self.bars = []
