"""A chain's batch of log densities evaluated across an executor's workers (:class:`ExecutorBatches`).

A kernel that evaluates independent proposals in batches (independence
Metropolis, ``imh``) evaluates them on this process's cores by default
(:func:`~stanaccel.densities.safe_log_densities`). On a Dask executor of
several workers a run gives it an :class:`ExecutorBatches` instead
(:func:`batch_evaluator`): the chains run in this process, and each batch
is split into one contiguous part per worker, the parts evaluated on the
workers at once and their values put back in order. Every value is the one
this process would compute (the same Stan program on the same data), so
the draws are those of a local run with the same seed.

The density travels to the workers once per chain
(:meth:`~stanaccel.executors.Executor.share`); each part carries only its
points and brings back their values and the seconds spent. The
evaluations are charged to the chain's own density
(:func:`~stanaccel.densities.charge`), so the run's evaluation counts and
the density's cost are those of a local run. A point where the density is
undefined is ``-inf`` there as here; any other error of the density (a
defect) is raised here. If the cluster fails (a worker lost with the
density, the scheduler gone), the batch, and every later batch of the run,
is evaluated here instead, with a warning: the chain goes on to the same
draws.

It pays where one evaluation costs much more than sending a point and its
value across the network and scheduling a task (about a millisecond per
part on a local cluster): expensive densities, such as big data or a PDE
solve.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from typing import Any

import numpy as np

from stanaccel.densities import charge, chargeable, safe_log_densities, safe_log_density, thread_safe


class ExecutorBatches:
    """Evaluates a batch of points across an executor's workers; a kernel's ``evaluate``.

    Parameters
    ----------
    executor : Executor
        One that can :meth:`~stanaccel.executors.Executor.share` (Dask).

    Attributes
    ----------
    lost : Exception or None
        The cluster's failure after which batches are evaluated here.
    """

    def __init__(self, executor):
        self.executor = executor
        self.lost: Exception | None = None
        self._shared: dict[int, tuple[Any, Any]] = {}  # id(density) -> (density, its handle)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ExecutorBatches({self.executor!r})"

    def __call__(self, density, points: np.ndarray) -> np.ndarray:
        """The log density at each row of ``points``, ``-inf`` where undefined; counted on ``density``."""
        points = np.atleast_2d(np.asarray(points, dtype=float))
        if self.lost is not None or len(points) < 2 or not chargeable(density):
            return safe_log_densities(density, points)
        try:
            handle = self._handle(density)
            parts = np.array_split(points, min(len(points), self.executor.workers))
            outcomes = self.executor.map(evaluate_part, [(handle, part) for part in parts])
        except Exception as error:  # the cluster's failure: a density's errors come back as outcomes
            self._lose(error)
            return safe_log_densities(density, points)
        for _, _, defect in outcomes:
            if defect is not None:
                raise defect
        charge(density, len(points), sum(seconds for _, seconds, _ in outcomes))
        return np.array([value for values, _, _ in outcomes for value in values], dtype=float)

    def _handle(self, density):
        with self._lock:
            if id(density) not in self._shared:
                self._shared[id(density)] = (density, self.executor.share(density))
            return self._shared[id(density)][1]

    def _lose(self, error: Exception) -> None:
        with self._lock:
            if self.lost is None:
                self.lost = error
                warnings.warn(
                    f"the batches of log densities are evaluated here from now on: {self.executor!r} "
                    f"failed ({type(error).__name__}: {error})",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def release(self) -> None:
        """Let the workers drop the densities shared with them (at the end of the run)."""
        with self._lock:
            self._shared.clear()


_part_locks: dict[int, threading.Lock] = {}  # id(density) -> its lock, on a worker
_part_locks_lock = threading.Lock()


def evaluate_part(item: tuple[Any, np.ndarray]) -> tuple[list[float], float, Exception | None]:
    """A part of a batch, where a worker runs it: its values, their seconds, and a defect or None.

    A density that may not be evaluated from several threads at once is
    evaluated by one part at a time on a worker of several threads.
    """
    density, points = item
    guard = contextlib.nullcontext()
    if not thread_safe(density):
        with _part_locks_lock:
            guard = _part_locks.setdefault(id(density), threading.Lock())
    start = time.perf_counter()
    try:
        with guard:
            values = [safe_log_density(density, x) for x in points]
    except Exception as defect:  # returned, so that here it is told from the cluster's own failures
        return [], time.perf_counter() - start, defect
    return values, time.perf_counter() - start, None


def batch_evaluator(executor, config) -> ExecutorBatches | None:
    """An :class:`ExecutorBatches` where the run's batches should go to ``executor``'s workers, else None.

    They should where the method evaluates batches of more than one point
    (a ``batch`` setting above 1), the executor has several workers and can
    share a density with them (Dask).
    """
    if executor is None or getattr(config, "batch", 1) < 2 or executor.workers < 2:
        return None
    return ExecutorBatches(executor) if executor.shares else None
