"""The base density pi(x) of the GP density model: a Gaussian with learned mean and covariance.

The hyperparameters theta_pi are the mean and the covariance's Cholesky
factor, with the diagonal on the log scale (``parameters()``: the
variational method's coordinates). In the Gibbs sampler pi enters the
augmented posterior only through prod pi(x) over the data and the latent
events (the Poisson process of rate lambda pi has total rate lambda whatever
pi is), so under the Jeffreys prior p(mean, cov) ~ |cov|^-(dim + 1)/2 its
conditional is Normal-inverse-Wishart and :meth:`GaussianBase.conditional_draw`
draws it exactly: no step size to tune, and it moves however many points
there are. (In one dimension this prior is the flat prior on the log sd.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.stats import invwishart, norm, qmc

GRID_HALF_WIDTH = 5.0
"""The quadrature grid spans +-5 sd of pi on each whitened axis: pi's mass outside, under 6e-7 an axis,
bounds the error of an integrand in [0, 1] cut off there."""


def normal_grid(dim: int, per_axis: int, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A regular grid of ``per_axis ** dim`` points over [-5, 5]^dim and weights N(z | 0, I) normalised to
    sum to 1: the trapezoid rule for integrals against a standard normal, whose error falls faster
    than any power of the spacing for a smooth integrand resolved by it. ``offset`` (in spacings, e.g.
    0.5) shifts the grid: the rule on the shifted grid is an independent estimate of the same integral,
    so the two differ by about the error of either."""
    if per_axis < 2:
        raise ValueError(f"a quadrature grid needs at least 2 points per axis, not {per_axis}")
    axis = np.linspace(-GRID_HALF_WIDTH, GRID_HALF_WIDTH, per_axis)
    axis = axis + offset * (axis[1] - axis[0])
    points = np.stack(np.meshgrid(*[axis] * dim, indexing="ij"), axis=-1).reshape(-1, dim)
    log_weights = -0.5 * np.sum(points**2, axis=1)
    weights = np.exp(log_weights - log_weights.max())
    return points, weights / weights.sum()


@dataclass(frozen=True)
class GaussianBase:
    """pi(x) = N(x | mean, chol chol^T); the support is all of R^dim."""

    mean: np.ndarray
    chol: np.ndarray

    @classmethod
    def fit(cls, points: np.ndarray) -> GaussianBase:
        """The Gaussian with the points' mean and covariance (the sampler's start)."""
        points = np.atleast_2d(points)
        cov = np.atleast_2d(np.cov(points, rowvar=False)) + 1e-9 * np.eye(points.shape[1])
        return cls(points.mean(axis=0), np.linalg.cholesky(cov))

    @classmethod
    def conditional_draw(cls, points: np.ndarray, rng: np.random.Generator) -> GaussianBase:
        """A draw of (mean, cov) given the points pi generated, under p(mean, cov) ~ |cov|^-(dim + 1)/2:
        cov ~ inverse-Wishart(n - 1, scatter), mean | cov ~ N(point mean, cov / n)."""
        points = np.atleast_2d(points)
        n, dim = points.shape
        if n <= dim:
            raise ValueError(f"{n} points cannot fit a {dim}-dimensional base measure")
        centre = points.mean(axis=0)
        scatter = (points - centre).T @ (points - centre)
        # unfrozen: the same draw as invwishart(df, scale).rvs, without building a frozen distribution
        cov = np.atleast_2d(invwishart.rvs(df=n - 1, scale=scatter, random_state=rng))
        chol = np.linalg.cholesky(cov)
        return cls(centre + chol @ rng.standard_normal(dim) / np.sqrt(n), chol)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mean + rng.standard_normal((n, self.dim)) @ self.chol.T

    def quasi_sample(self, n: int, seed: int = 0) -> np.ndarray:
        """n scrambled-Sobol points mapped through pi: integrals over pi by quasi-Monte Carlo, whose
        error falls almost as 1/n in low dimension rather than 1/sqrt(n)."""
        unit = qmc.Sobol(self.dim, scramble=True, seed=seed).random(n)
        unit = np.clip(unit, 2.0**-53, 1 - 2.0**-53)  # a scrambled point can be exactly 0 (seed 108722694)
        return self.mean + norm.ppf(unit) @ self.chol.T

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        w = solve_triangular(self.chol, (np.atleast_2d(x) - self.mean).T, lower=True)
        return (
            -0.5 * np.sum(w**2, axis=0)
            - np.sum(np.log(np.diag(self.chol)))
            - 0.5 * self.dim * np.log(2 * np.pi)
        )

    def parameters(self) -> np.ndarray:
        """(mean, lower triangle of chol with log diagonal) as one vector."""
        tri = self.chol[np.tril_indices(self.dim)].copy()
        diagonal = np.tril_indices(self.dim)[0] == np.tril_indices(self.dim)[1]
        tri[diagonal] = np.log(tri[diagonal])
        return np.concatenate([self.mean, tri])

    @classmethod
    def from_parameters(cls, values: np.ndarray, dim: int) -> GaussianBase:
        values = np.asarray(values, dtype=float)
        chol = np.zeros((dim, dim))
        rows, cols = np.tril_indices(dim)
        tri = values[dim:].copy()
        tri[rows == cols] = np.exp(tri[rows == cols])
        chol[rows, cols] = tri
        return cls(values[:dim].copy(), chol)
