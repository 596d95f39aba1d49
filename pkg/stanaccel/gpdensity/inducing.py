"""Inducing points of the sparse GP (the variational method and the Stan baseline).

The paper's choice: half of the L points drawn from the initial base measure,
half at k-means centres of the observations, so they cover both where the
data are and where the base measure puts mass.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from stanaccel.gpdensity.base_measure import GaussianBase


def inducing_points(data: np.ndarray, n_inducing: int, base: GaussianBase, seed: int = 0) -> np.ndarray:
    """L points: ``L - L // 2`` k-means centres of ``data`` and ``L // 2`` draws from ``base``."""
    if n_inducing < 2:
        raise ValueError(f"need at least 2 inducing points, not {n_inducing}")
    n_centres = min(n_inducing - n_inducing // 2, len(np.unique(data, axis=0)))
    centres = KMeans(n_centres, n_init=3, random_state=seed).fit(data).cluster_centers_
    draws = base.sample(n_inducing - n_centres, np.random.default_rng(seed))
    return np.vstack([centres, draws])
