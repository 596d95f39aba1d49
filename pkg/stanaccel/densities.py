"""The log-density protocol, evaluation counting and safe evaluation: the ground floor.

Kernels, approximations and latent samplers all stand on this module, and it
imports nothing of stanaccel, so none of them needs another to see a density.
A log density is anything with ``dim``, ``log_density(x)`` and
``log_density_gradient(x) -> (lp, grad)`` on the unconstrained space: a Stan
instance, a tempered or subsampled instance, an approximation, or the NumPy
:class:`FunctionDensity` here. Kernels never see Stan.

A point where the density is undefined is a rejected proposal, never a crash:
an ``ArithmeticError`` from the density (Stan's domain errors are
``ArithmeticError`` too, as are NumPy's ``FloatingPointError``) or a
non-finite value gives ``-inf``. Any other exception is a defect and
propagates.

A batch of points is evaluated by :func:`safe_log_densities`: on every core
of the machine at once, in one thread pool shared by all chains, when the
density says it may be evaluated from several threads at once
(``thread_safe``: a Stan instance releases the GIL and keeps its autodiff
tape per thread), else in turn. Counters are updated under
:data:`COUNTING`, so evaluations from several threads are all counted.
Evaluations made elsewhere, by a copy of a density on another machine, are
added to the density's own counters by :func:`charge`.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

COUNTING = threading.Lock()
"""The lock a density holds while it updates its evaluation counters (and timers): a batch
evaluated in threads would otherwise lose counts (``n += 1`` is a read, then a write)."""


class FunctionDensity:
    """A log density from NumPy functions, counting its evaluations.

    Parameters
    ----------
    dim : int
    log_density : callable x -> float
    gradient : callable x -> ndarray, optional
        Without it, ``log_density_gradient`` raises (use gradient-free kernels).
    """

    def __init__(
        self,
        dim: int,
        log_density: Callable[[np.ndarray], float],
        gradient: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        self.dim = dim
        self._log_density = log_density
        self._gradient = gradient
        self.n_log_density = 0
        self.n_gradient = 0

    def log_density(self, x: np.ndarray) -> float:
        with COUNTING:
            self.n_log_density += 1
        return float(self._log_density(x))

    def log_density_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if self._gradient is None:
            raise TypeError("this density has no gradient; use a gradient-free kernel")
        with COUNTING:
            self.n_gradient += 1
        return float(self._log_density(x)), np.asarray(self._gradient(x), dtype=float)


def evaluations(density) -> int:
    """Evaluations of a density so far (log density and gradient calls together)."""
    return int(getattr(density, "n_log_density", 0) + getattr(density, "n_gradient", 0))


def chargeable(density) -> bool:
    """Whether :func:`charge` can add evaluations to ``density``'s counters.

    It can where the density has a ``charge`` method (a wrapper whose
    counters are its inner density's) or keeps ``n_log_density`` itself.
    """
    return hasattr(density, "charge") or "n_log_density" in getattr(density, "__dict__", {})


def charge(density, log_densities: int, seconds: float = 0.0) -> None:
    """Count ``log_densities`` evaluations made elsewhere, by a copy of ``density``, as its own.

    A density that times its evaluations (``seconds``) is charged
    ``seconds`` too. The counts are what a report of the density's cost
    reads (:func:`evaluations`), wherever the evaluations ran.
    """
    if hasattr(density, "charge"):
        density.charge(log_densities, seconds)
        return
    with COUNTING:
        density.n_log_density += log_densities


def safe_log_density(density, x: np.ndarray) -> float:
    """``density.log_density(x)``, or ``-inf`` where the density is undefined."""
    try:
        value = float(density.log_density(x))
    except ArithmeticError:
        return -np.inf
    return value if math.isfinite(value) else -np.inf


def thread_safe(density) -> bool:
    """Whether ``density`` may be evaluated from several threads at once (it says so: ``thread_safe``).

    A Stan instance does (the bridge releases the GIL, and each thread has its
    own autodiff tape); a NumPy or Python density is evaluated in turn unless
    its ``thread_safe`` attribute is set, since it may keep state between calls.
    """
    return bool(getattr(density, "thread_safe", False))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system reports it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


_pool: tuple[int, ThreadPoolExecutor] | None = None  # (process id, pool): a forked child makes its own
_pool_lock = threading.Lock()


def evaluation_pool() -> ThreadPoolExecutor:
    """The process's thread pool for batches of density evaluations: one thread per usable core.

    One pool for all chains, so chains that evaluate batches at the same
    time share the cores instead of each starting a thread per core.
    """
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            pool = ThreadPoolExecutor(max_workers=usable_cores(), thread_name_prefix="stanaccel-density")
            _pool = (os.getpid(), pool)
        return _pool[1]


def safe_log_densities(density, points: np.ndarray) -> np.ndarray:
    """:func:`safe_log_density` at each row of ``points`` (n, dim): ``-inf`` where undefined.

    A ``thread_safe`` density is evaluated on every usable core at once
    (:func:`evaluation_pool`), the points split into one contiguous chunk
    per core; any other density, a single point or a single core, in turn
    in this thread. The values are the same either way; an exception other
    than an undefined density (a defect) propagates as from one evaluation.
    Call it from a chain's thread, never from a density evaluated in the
    pool (its threads would wait on themselves).
    """
    points = np.atleast_2d(np.asarray(points, dtype=float))
    n, cores = len(points), usable_cores()

    def chunk(rows: np.ndarray) -> list[float]:
        return [safe_log_density(density, x) for x in rows]

    if n < 2 or cores < 2 or not thread_safe(density):
        return np.array(chunk(points), dtype=float).reshape(n)
    parts = np.array_split(points, min(n, cores))
    futures = [evaluation_pool().submit(chunk, part) for part in parts]
    return np.array([value for future in futures for value in future.result()], dtype=float)


def safe_log_density_gradient(density, x: np.ndarray) -> tuple[float, np.ndarray | None]:
    """``density.log_density_gradient(x)`` with an owned gradient copy, or ``(-inf, None)``."""
    try:
        value, grad = density.log_density_gradient(x)
    except ArithmeticError:
        return -np.inf, None
    value = float(value)
    grad = np.array(grad, dtype=float)  # own a copy: a density may reuse its buffer
    if not math.isfinite(value) or not all_finite(grad):
        return -np.inf, None
    return value, grad


FEW = 48
"""Up to this many entries, :func:`all_finite` checks Python floats: NumPy's fixed cost per call
(about 1.8 microseconds) is more than the whole check, and it is paid on every gradient of every
kernel."""


def all_finite(values: np.ndarray) -> bool:
    """Whether every entry of ``values`` is finite (neither NaN nor infinite)."""
    if values.size <= FEW:
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.isfinite(values).all())


def kernel_densities(kernel) -> list:
    """The log densities a kernel evaluates (for counting its cost)."""
    if hasattr(kernel, "densities"):
        return list(kernel.densities)
    for name in ("density", "log_likelihood"):
        if hasattr(kernel, name):
            return [getattr(kernel, name)]
    return []
