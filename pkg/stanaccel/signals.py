"""Stop signals: SIGTERM and SIGHUP stop a run as Ctrl-C does, and it keeps its draws.

``timeout``, ``kill``, SLURM at a job's time limit and ``docker stop`` send
SIGTERM; a closed terminal sends SIGHUP. Python's default for both is to end
the process at once, every draw lost. stanaccel's samplers stop on
``KeyboardInterrupt`` (what Python raises on Ctrl-C) and return the draws
made so far, so the command line (:func:`stop_on_signals`) has all three
signals raise it, in the main thread, and records which came
(:func:`received`), for its message and its exit status (128 + the signal's
number, as a shell reports a process a signal ended).

Once a signal has stopped the run, more of them are ignored with a line on
stderr: SLURM and ``docker stop`` send SIGTERM and, seconds later, SIGKILL,
and the draws are then being written; a second SIGTERM must not cut that
write short. SIGKILL cannot be caught: what a workflow checkpointed stays.

Worker processes (:mod:`stanaccel.executors`) ignore all three
(:func:`ignore_stop_signals`): the signal a terminal or ``timeout`` sends to
the whole process group is the main process's to handle, which stops them.

A stop is final: once one has come, no phase starts (Stan's services, the
kernels' chains, the C++ compiler call :func:`refuse_after_stop` first), so
a phase that took the ``KeyboardInterrupt`` for a failure of its own and
handed over to the next one cannot carry the run on.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals that stop a run and keep its draws: Ctrl-C, ``kill``/``timeout``/SLURM, a closed terminal."""

_received: list[int] = []


def received() -> int | None:
    """The first stop signal received while :func:`stop_on_signals` holds, or None."""
    return _received[0] if _received else None


def refuse_after_stop(what: str) -> None:
    """Raise ``KeyboardInterrupt`` if a stop signal has come: ``what``, a phase about to start, must not.

    The stop is a ``KeyboardInterrupt`` in whatever the main thread was
    doing, and a phase may take it for a failure of its own (a Pathfinder
    stopped before its paths had draws looks like paths that all failed)
    and hand over to the next phase: the run would not stop. So each phase
    (Stan's services, the kernels' chains) checks here before it starts.
    ``what`` names it, for the message ("Stan's NUTS").
    """
    if _received:
        raise KeyboardInterrupt(f"stopped before {what} began")


def describe(signum: int | None) -> str:
    """A signal in words, as the messages say it: "Ctrl-C (SIGINT)", "SIGTERM", "SIGHUP"."""
    if signum is None or signum == signal.SIGINT:
        return "Ctrl-C"
    return signal.Signals(signum).name


def _stop(signum: int, frame) -> None:
    if _received:
        print(
            f"stanaccel: {describe(signum)} received while stopping: ignored, the draws made so far are "
            "being written (kill -9 ends the process at once, losing them)",
            file=sys.stderr,
            flush=True,
        )
        return
    _received.append(signum)
    raise KeyboardInterrupt


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While the block runs, SIGINT, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` in the main thread.

    Only the main thread can set a handler: elsewhere this does nothing. A
    signal that this process ignores (a command started in the background
    with ``nohup``, which ignores SIGHUP) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()  # a new run: an earlier one's stop is not this one's
    previous = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received.clear()  # what runs after it (a test, a caller's code) is not stopped


def ignore_stop_signals() -> None:
    """Make this (worker) process ignore the stop signals: its parent handles them and stops the workers."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """Ignore the stop signals here while worker processes start, so that they start ignoring them.

    An ignored signal stays ignored across ``exec``, and Python then installs
    no handler of its own; a pool's initializer runs only once a worker has
    imported what it needs, too late for a signal during those seconds. Only
    the main thread can change a handler; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
