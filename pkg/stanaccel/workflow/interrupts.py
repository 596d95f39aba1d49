"""Noticing Ctrl-C during a workflow step, even when the step keeps its draws and returns.

Samplers catch ``KeyboardInterrupt`` so that a stopped run keeps what it
drew; a step built on them then returns normally with partial results. The
workflow runner must still stop there, so while a step runs it watches for
SIGINT itself and raises :class:`WorkflowInterrupted` afterwards.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class WorkflowInterrupted(KeyboardInterrupt):
    """A workflow stopped by Ctrl-C; the message says which step and where its outputs are."""


class InterruptWatch:
    """Whether SIGINT arrived while :meth:`watching` was active.

    Python's own handler still runs (it raises ``KeyboardInterrupt`` where
    the program is), so samplers stop as they always do.
    """

    def __init__(self) -> None:
        self.seen = False

    @contextlib.contextmanager
    def watching(self) -> Iterator[InterruptWatch]:
        """Install the watching handler (main thread only; elsewhere, nothing to watch)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = signal.getsignal(signal.SIGINT)
        if not callable(previous):  # SIGINT ignored (a background job) or left to the OS
            yield self
            return

        def handler(signum, frame):
            self.seen = True
            previous(signum, frame)

        signal.signal(signal.SIGINT, handler)
        try:
            yield self
        finally:
            signal.signal(signal.SIGINT, previous)
