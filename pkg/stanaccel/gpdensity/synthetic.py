"""Synthetic densities with known truth for the GP density model, and distances to the truth.

Each target is a Gaussian mixture whose shape differs from any single
Gaussian, so the base measure alone fits it poorly and the GP has something
to learn. Distances are computed on a regular grid that covers the truth's
mass (1-D, 2-D and 3-D).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp
from scipy.stats import multivariate_normal


@dataclass(frozen=True)
class Mixture:
    """sum_k w_k N(mean_k, cov_k)."""

    weights: np.ndarray
    means: np.ndarray
    covs: np.ndarray

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        component = rng.choice(len(self.weights), size=n, p=self.weights)
        chols = np.linalg.cholesky(self.covs)
        noise = rng.standard_normal((n, self.dim))
        return self.means[component] + np.einsum("nij,nj->ni", chols[component], noise)

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float).reshape(-1, self.dim)
        parts = [
            np.log(w) + multivariate_normal(m, c).logpdf(x)
            for w, m, c in zip(self.weights, self.means, self.covs, strict=True)
        ]
        return logsumexp(np.reshape(parts, (len(parts), -1)), axis=0)

    def grid(self, per_axis: int) -> tuple[np.ndarray, float]:
        """A regular grid over mean +- 4.5 sd of every component, and the volume of one cell."""
        sds = np.sqrt(np.einsum("kii->ki", self.covs))
        low, high = (self.means - 4.5 * sds).min(0), (self.means + 4.5 * sds).max(0)
        axes = [np.linspace(lo, hi, per_axis) for lo, hi in zip(low, high, strict=True)]
        mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, self.dim)
        return mesh, float(np.prod([a[1] - a[0] for a in axes]))


TARGETS = {
    # two well separated bumps of different widths: a single Gaussian puts mass between them
    "bimodal_1d": Mixture(np.array([0.35, 0.65]), np.array([[-2.0], [1.0]]), np.array([[[0.4]], [[0.8]]])),
    # a skewed three-component density in 2-D
    "mixture_2d": Mixture(
        np.array([0.4, 0.35, 0.25]),
        np.array([[-1.5, 0.0], [1.2, 1.0], [0.5, -1.8]]),
        np.array([[[0.5, 0.3], [0.3, 0.6]], [[0.4, -0.2], [-0.2, 0.5]], [[0.3, 0.0], [0.0, 0.3]]]),
    ),
    # three correlated components in 3-D, one of them flat along the third axis
    "mixture_3d": Mixture(
        np.array([0.45, 0.35, 0.2]),
        np.array([[-1.4, 0.0, 0.5], [1.2, 1.0, -0.6], [0.4, -1.6, 0.4]]),
        np.array(
            [
                [[0.5, 0.25, 0.0], [0.25, 0.5, 0.1], [0.0, 0.1, 0.4]],
                [[0.4, -0.15, 0.1], [-0.15, 0.4, 0.0], [0.1, 0.0, 0.3]],
                [[0.3, 0.0, 0.0], [0.0, 0.2, 0.0], [0.0, 0.0, 0.9]],
            ]
        ),
    ),
}


def target(name: str) -> Mixture:
    """A named synthetic density: ``bimodal_1d``, ``mixture_2d`` or ``mixture_3d``."""
    if name not in TARGETS:
        raise ValueError(f"no synthetic density {name!r}; have {sorted(TARGETS)}")
    return TARGETS[name]


def distances(truth: Mixture, estimate: np.ndarray, grid: np.ndarray, cell: float) -> dict[str, float]:
    """Hellinger and L2 distances between the truth and a density given on ``grid`` (cell volume ``cell``).

    Hellinger: sqrt(1/2 int (sqrt p - sqrt q)^2) in [0, 1].
    """
    p = np.exp(truth.logpdf(grid))
    q = np.asarray(estimate, dtype=float)
    return {
        "hellinger": float(np.sqrt(0.5 * np.sum((np.sqrt(p) - np.sqrt(q)) ** 2) * cell)),
        "l2": float(np.sqrt(np.sum((p - q) ** 2) * cell)),
    }
