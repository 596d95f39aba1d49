"""Data for the Stan baseline of the GP density model (``stan/gp_density.stan``).

The Stan program is an approximation of the model: the normaliser
Z = E_pi[sigma(g)] is the average of sigma(g) over R fixed standard-normal
draws mapped through the learned base measure, and g lives only at the
data, those R points and the output grid. Its Monte Carlo error falls as
1/sqrt(R), and every gradient costs O((N + R + G)^3).

Work in progress: with the program's current hyperpriors NUTS degenerates
on a 100-point 1-D mixture (R = 100: amplitude about 3e4, step size 1e-4,
non-finite density draws), because a finite normaliser sample lets g rise
at the data and fall at the normaliser points. Not yet a usable baseline.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel.gpdensity.gibbs import check_data


def stan_data(
    data: np.ndarray,
    *,
    n_normaliser: int = 200,
    grid: np.ndarray | None = None,
    seed: int = 0,
    mu0_sd: float = 2.0,
) -> dict[str, Any]:
    """Stan data for ``gp_density.stan``: observations, R fixed normaliser draws, output points."""
    data = check_data(data)
    if n_normaliser < 1:
        raise ValueError(f"n_normaliser must be at least 1, not {n_normaliser}")
    dim = data.shape[1]
    grid = np.empty((0, dim)) if grid is None else np.asarray(grid, dtype=float).reshape(-1, dim)
    eps = np.random.default_rng(seed).standard_normal((n_normaliser, dim))
    return {
        "N": len(data),
        "D": dim,
        "x": data,
        "R": n_normaliser,
        "eps": eps,
        "G": len(grid),
        "grid": grid,
        "scale": data.std(axis=0),
        "mu0_sd": mu0_sd,
    }
