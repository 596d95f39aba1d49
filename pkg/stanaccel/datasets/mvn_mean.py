"""Synthetic data for ``stan/mvn_mean.stan`` and its exact posterior.

The paper leaves the covariances open; stanaccel uses a prior N(0, I) on the
mean and a known, correlated observation covariance Sigma = A A^T / D + I/2
with A standard normal, so the posterior has correlated coordinates.
"""

from __future__ import annotations

import numpy as np

from stanaccel.datasets import Dataset


def generate(N: int = 256, D: int = 5, seed: int = 0, beta: float = 1.0) -> Dataset:
    """Draw the mean from the prior, then N observations."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((D, D))
    Sigma = A @ A.T / D + 0.5 * np.eye(D)
    mu0, Sigma0 = np.zeros(D), np.eye(D)
    theta = rng.multivariate_normal(mu0, Sigma0)
    x = theta + rng.standard_normal((N, D)) @ np.linalg.cholesky(Sigma).T
    data = {"D": D, "N": N, "x": x, "mu0": mu0, "Sigma0": Sigma0, "Sigma": Sigma, "beta": beta}
    return Dataset("mvn_mean", data, {"theta": theta})


def exact_posterior(data: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of the (power-tempered) posterior of theta.

    precision = Sigma0^-1 + beta N Sigma^-1,
    mean = precision^-1 (Sigma0^-1 mu0 + beta Sigma^-1 sum_n x_n).
    """
    x = np.asarray(data["x"], dtype=float).reshape(-1, int(data["D"]))
    beta = float(data["beta"])
    prior_precision = np.linalg.inv(np.asarray(data["Sigma0"], dtype=float))
    noise_precision = np.linalg.inv(np.asarray(data["Sigma"], dtype=float))
    precision = prior_precision + beta * x.shape[0] * noise_precision
    covariance = np.linalg.inv(precision)
    mean = covariance @ (prior_precision @ np.asarray(data["mu0"], float) + beta * noise_precision @ x.sum(0))
    return mean, covariance


def exact_log_evidence(data: dict) -> float:
    """log p(x) of the untempered model, with every constant: log p(x | t) + log p(t) - log p(t | x),
    which holds at any t (here the posterior mean)."""
    from scipy.stats import multivariate_normal

    mean, cov = exact_posterior({**data, "beta": 1.0})
    x = np.asarray(data["x"], dtype=float).reshape(-1, int(data["D"]))
    return float(
        multivariate_normal(mean, data["Sigma"]).logpdf(x).sum()
        + multivariate_normal(data["mu0"], data["Sigma0"]).logpdf(mean)
        - multivariate_normal(mean, cov).logpdf(mean)
    )
