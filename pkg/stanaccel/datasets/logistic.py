"""Synthetic data for ``stan/logistic.stan``: weights from the prior, Bernoulli outcomes.

Features are standard normal; with ``collinear=c`` the last c features are
near-copies of the first c (plus ``noise``), so the posterior has c long,
thin ridges (the weights of a feature and its copy trade off) among
well-determined directions: a badly conditioned posterior whose large
variance lies in a few directions, where NUTS needs long trajectories and an
autoencoder with about c latent dimensions can help. A
held-out test set from the same model is kept in ``truth`` (``X_test``,
``y_test``) for predictive accuracy.
"""

from __future__ import annotations

import numpy as np

from stanaccel.datasets import Dataset


def generate(
    N: int = 200,
    K: int = 5,
    seed: int = 0,
    prior_scale: float = 1.0,
    beta: float = 1.0,
    collinear: int = 0,
    noise: float = 0.05,
    N_test: int = 0,
) -> Dataset:
    """Draw intercept and weights from the prior, N (+ N_test) feature rows, and Bernoulli outcomes.

    Parameters
    ----------
    collinear : int
        Make the last ``collinear`` features copies of the first ones plus noise.
    noise : float
        Sd of the noise added to each copy.
    N_test : int
        Extra rows kept out of the Stan data, in ``truth["X_test"]`` and ``truth["y_test"]``.
    """
    if not 0 <= collinear <= K // 2:
        raise ValueError(f"collinear must be between 0 and K/2={K // 2}, not {collinear}")
    prior_rng, input_rng, outcome_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    alpha = prior_rng.normal(0.0, prior_scale)
    w = prior_rng.normal(0.0, prior_scale, size=K)
    total = N + N_test
    X = input_rng.standard_normal((total, K))
    if collinear:
        X[:, K - collinear :] = X[:, :collinear] + noise * input_rng.standard_normal((total, collinear))
    p = 1.0 / (1.0 + np.exp(-(alpha + X @ w)))
    y = (outcome_rng.uniform(size=total) < p).astype(int)
    data = {"N": N, "K": K, "X": X[:N], "y": y[:N], "prior_scale": prior_scale, "beta": beta}
    truth = {"alpha": alpha, "w": w}
    if N_test:
        truth.update({"X_test": X[N:], "y_test": y[N:]})
    return Dataset("logistic", data, truth)
