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
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


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
        self.n_log_density += 1
        return float(self._log_density(x))

    def log_density_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        if self._gradient is None:
            raise TypeError("this density has no gradient; use a gradient-free kernel")
        self.n_gradient += 1
        return float(self._log_density(x)), np.asarray(self._gradient(x), dtype=float)


def evaluations(density) -> int:
    """Evaluations of a density so far (log density and gradient calls together)."""
    return int(getattr(density, "n_log_density", 0) + getattr(density, "n_gradient", 0))


def safe_log_density(density, x: np.ndarray) -> float:
    """``density.log_density(x)``, or ``-inf`` where the density is undefined."""
    try:
        value = float(density.log_density(x))
    except ArithmeticError:
        return -np.inf
    return value if np.isfinite(value) else -np.inf


def safe_log_density_gradient(density, x: np.ndarray) -> tuple[float, np.ndarray | None]:
    """``density.log_density_gradient(x)`` with an owned gradient copy, or ``(-inf, None)``."""
    try:
        value, grad = density.log_density_gradient(x)
    except ArithmeticError:
        return -np.inf, None
    value = float(value)
    grad = np.array(grad, dtype=float)  # own a copy: a density may reuse its buffer
    if not np.isfinite(value) or not np.all(np.isfinite(grad)):
        return -np.inf, None
    return value, grad


def kernel_densities(kernel) -> list:
    """The log densities a kernel evaluates (for counting its cost)."""
    if hasattr(kernel, "densities"):
        return list(kernel.densities)
    for name in ("density", "log_likelihood"):
        if hasattr(kernel, name):
            return [getattr(kernel, name)]
    return []
