"""Synthetic GP-regression data for ``stan/gp_ard.stan``.

The recipe of the tempering-by-subsampling paper: hyperparameters from the
prior (length scales LogNormal(0.5, 1), signal scale Gamma(4, 1), noise
Gamma(2, 2) with rate 2), inputs from an isotropic Gaussian centred at 0 with
standard deviation equal to the mean length scale, outputs from the GP.
"""

from __future__ import annotations

import numpy as np

from stanaccel.datasets import Dataset


def squared_exponential(x: np.ndarray, ell: np.ndarray, sigma_f: float) -> np.ndarray:
    """The ARD squared-exponential covariance matrix of the rows of ``x``."""
    z = x / ell
    sq = np.sum(z**2, axis=1)
    dist2 = np.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0)
    return sigma_f**2 * np.exp(-0.5 * dist2)


def generate(
    N: int = 64,
    D: int = 3,
    seed: int = 0,
    beta: float = 1.0,
    ell=None,
    sigma_f: float | None = None,
    sigma_n: float | None = None,
) -> Dataset:
    """Draw hyperparameters from the prior, then N inputs and outputs from the GP.

    ``ell`` (a length D list), ``sigma_f`` and ``sigma_n`` fix a hyperparameter
    instead of drawing it (for example a noisier, smoother data set, where
    low-rank approximations are good).
    """
    prior_rng, input_rng, noise_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    drawn = (prior_rng.lognormal(0.5, 1.0, size=D), prior_rng.gamma(4.0, 1.0), prior_rng.gamma(2.0, 0.5))
    ell = drawn[0] if ell is None else np.asarray(ell, dtype=float)
    sigma_f = drawn[1] if sigma_f is None else float(sigma_f)
    sigma_n = drawn[2] if sigma_n is None else float(sigma_n)
    if ell.shape != (D,):
        raise ValueError(f"ell must have D = {D} entries, not {ell.shape}")
    x = input_rng.normal(0.0, ell.mean(), size=(N, D))
    K = squared_exponential(x, ell, sigma_f) + sigma_n**2 * np.eye(N)
    # Lower Cholesky: y[:n] depends only on z[:n], so data sets are nested in N.
    L = np.linalg.cholesky(K + 1e-10 * np.eye(N))
    y = L @ noise_rng.standard_normal(N)
    data = {"N": N, "D": D, "x": x, "y": y, "beta": beta}
    truth = {"ell": ell, "sigma_f": sigma_f, "sigma_n": sigma_n}
    return Dataset("gp_ard", data, truth)
