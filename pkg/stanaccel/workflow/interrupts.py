"""Noticing a stop (Ctrl-C, SIGTERM, SIGHUP) during a workflow step, even where the step returns its draws.

Samplers catch ``KeyboardInterrupt`` so that a stopped run keeps what it
drew; a step built on them then returns normally with partial results. The
workflow runner must still stop there, so while a step runs it watches for
the stop signals itself (:data:`stanaccel.signals.STOP_SIGNALS`) and raises
:class:`WorkflowInterrupted` afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from stanaccel.signals import STOP_SIGNALS, describe


class WorkflowInterrupted(KeyboardInterrupt):
    """A workflow stopped by a signal; the message says which step and where its outputs are."""


class InterruptWatch:
    """Which stop signal arrived while :meth:`watching` was active (None: none).

    The handler that was there still runs (Python's own raises
    ``KeyboardInterrupt`` on Ctrl-C; the command line's does so on SIGTERM
    and SIGHUP too), so samplers stop as they always do.
    """

    def __init__(self) -> None:
        self.signal: int | None = None

    @property
    def seen(self) -> bool:
        """Whether a stop signal arrived."""
        return self.signal is not None

    @property
    def what(self) -> str:
        """The signal in words, for the messages: "Ctrl-C", "SIGTERM"."""
        return describe(self.signal)

    @contextlib.contextmanager
    def watching(self) -> Iterator[InterruptWatch]:
        """Install the watching handlers (main thread only; elsewhere, nothing to watch)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
        watched = {s: h for s, h in previous.items() if callable(h)}  # not ignored, not left to the OS

        def handler(signum, frame):
            if self.signal is None:
                self.signal = signum
            watched[signum](signum, frame)

        for signum in watched:
            signal.signal(signum, handler)
        try:
            yield self
        finally:
            for signum, previous_handler in watched.items():
                signal.signal(signum, previous_handler)
