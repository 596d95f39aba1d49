"""The squared-exponential covariance of the GP g, and Gaussian conditioning on it.

``k(x, x') = amplitude^2 exp(-1/2 sum_d (x_d - x'_d)^2 / lengthscale_d^2)``
with hyperparameters theta_k = (amplitude, lengthscales).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

JITTER = 1e-6  # relative to amplitude^2, added to the diagonal of every kernel matrix


@dataclass(frozen=True)
class SquaredExponential:
    """A squared-exponential kernel with one lengthscale per input dimension."""

    amplitude: float
    lengthscales: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "lengthscales", np.atleast_1d(np.asarray(self.lengthscales, dtype=float)))
        if self.amplitude <= 0 or np.any(self.lengthscales <= 0):
            raise ValueError(
                f"amplitude and lengthscales must be positive, not {self.amplitude}, {self.lengthscales}"
            )

    def __call__(self, a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        """The kernel matrix between the rows of a and b (of a and itself, with jitter, if b is None)."""
        same = b is None
        a = np.atleast_2d(a) / self.lengthscales
        b = a if same else np.atleast_2d(b) / self.lengthscales
        # the same operations as amplitude^2 exp(-0.5 max(|a|^2 + |b|^2 - 2 a b^T, 0)), in place: at a
        # thousand points the temporaries cost more than the exponential
        K = np.sum(a**2, 1)[:, None] + np.sum(b**2, 1)[None, :]
        K -= 2 * a @ b.T
        np.maximum(K, 0.0, out=K)
        K *= -0.5
        np.exp(K, out=K)
        K *= self.amplitude**2
        if same:
            K[np.diag_indices_from(K)] += JITTER * self.amplitude**2
        return K

    def log_parameters(self) -> np.ndarray:
        return np.log(np.concatenate([[self.amplitude], self.lengthscales]))

    @classmethod
    def from_log_parameters(cls, values: np.ndarray) -> SquaredExponential:
        values = np.exp(np.asarray(values, dtype=float))
        return cls(float(values[0]), values[1:])


def conditional_draw(
    kernel: SquaredExponential,
    points: np.ndarray,
    g_points: np.ndarray,
    new: np.ndarray,
    mean: float,
    rng: np.random.Generator,
    chol: np.ndarray | None = None,
    extra_jitter: float = JITTER,
) -> np.ndarray:
    """A joint draw of g at ``new`` given g at ``points`` (the GP prior conditioned on them).

    ``chol``: the lower Cholesky factor of ``kernel(points)`` if already known. ``extra_jitter``
    (relative to amplitude^2) is added to the conditional covariance's diagonal for a safe factorisation;
    0 draws from the exact conditional of the jittered kernel matrix at ``points`` and ``new`` together
    (what a move whose acceptance ratio cancels this density needs).
    """
    if len(new) == 0:
        return np.empty(0)
    if len(points) == 0:
        L = np.linalg.cholesky(kernel(new))
        return mean + L @ rng.standard_normal(len(new))
    factor = (np.linalg.cholesky(kernel(points)) if chol is None else chol, True)
    cross = kernel(points, new)
    conditional_mean = mean + cross.T @ cho_solve(factor, g_points - mean)
    half = solve_triangular(factor[0], cross, lower=True)
    covariance = kernel(new) - half.T @ half
    L = np.linalg.cholesky(covariance + extra_jitter * kernel.amplitude**2 * np.eye(len(new)))
    return conditional_mean + L @ rng.standard_normal(len(new))


def conditional_marginals(
    kernel: SquaredExponential,
    points: np.ndarray,
    g_points: np.ndarray,
    new: np.ndarray,
    mean: float,
    chol: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of g at each of ``new`` given g at ``points``: O(n |new|) after one factorisation,
    for evaluating the density at many points where the joint draw would cost O(|new|^3).
    ``chol``: the lower Cholesky factor of ``kernel(points)`` if already known."""
    factor = (np.linalg.cholesky(kernel(points)) if chol is None else chol, True)
    cross = kernel(points, new)
    half = solve_triangular(factor[0], cross, lower=True)
    variance = kernel.amplitude**2 - np.sum(half**2, axis=0)
    return mean + cross.T @ cho_solve(factor, g_points - mean), np.maximum(variance, 0.0)


def log_gp_density(kernel: SquaredExponential, points: np.ndarray, g: np.ndarray, mean: float) -> float:
    """log N(g | mean, K(points)), the GP prior density of g at the points."""
    L = np.linalg.cholesky(kernel(points))
    w = solve_triangular(L, g - mean, lower=True)
    return float(-0.5 * w @ w - np.sum(np.log(np.diag(L))) - 0.5 * len(g) * np.log(2 * np.pi))
