"""Synthetic data for ``stan/logistic.stan``: standard normal features, weights from the prior."""

from __future__ import annotations

import numpy as np

from stanaccel.datasets import Dataset


def generate(N: int = 200, K: int = 5, seed: int = 0, prior_scale: float = 1.0, beta: float = 1.0) -> Dataset:
    """Draw intercept and weights from the prior, N feature rows, and Bernoulli outcomes."""
    prior_rng, input_rng, outcome_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3)
    )
    alpha = prior_rng.normal(0.0, prior_scale)
    w = prior_rng.normal(0.0, prior_scale, size=K)
    X = input_rng.standard_normal((N, K))
    p = 1.0 / (1.0 + np.exp(-(alpha + X @ w)))
    y = (outcome_rng.uniform(size=N) < p).astype(int)
    data = {"N": N, "K": K, "X": X, "y": y, "prior_scale": prior_scale, "beta": beta}
    return Dataset("logistic", data, {"alpha": alpha, "w": w})
