"""Cheap approximations of the GP-regression posterior (``stan/gp_ard.stan``).

Both return Stan instances with gp_ard's parameters, so they pair with the
exact posterior (:class:`stanaccel.approx.ApproximationPair`):

- subset of data: the same program (any program, given which data are per
  observation) on m observations drawn at random. Its
  posterior is wider than pi by about sqrt(N/m); ``scale=True`` multiplies the
  subset's log likelihood by N/m (gp_ard's ``beta``) to match pi's width;
- low rank: ``stan/gp_ard_lowrank.stan`` with m inducing inputs, FITC (the
  exact diagonal restored) or subset of regressors. Wang & Neal leave the
  choice of inducing inputs open; by default they are a random subset of
  the training inputs ("landmarks"), or k-means centres of the inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel.observations import BUNDLED, Observations
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program

LOW_RANK_KINDS = ("fitc", "sor")


def _check_size(m: int, n: int, what: str) -> None:
    if not 1 <= m <= n:
        raise ValueError(f"{what} must be between 1 and N = {n}, not {m}")


def subset_of_data(
    model: StanModel,
    data: dict[str, Any],
    m: int,
    *,
    seed: int = 0,
    scale: bool = False,
    observations: Observations | dict | None = None,
):
    """The same program on m observations drawn at random without replacement (fixed by ``seed``).

    Parameters
    ----------
    observations : Observations or ``{"count": "N", "fields": [...]}``, optional
        Which data are per observation; default: the bundled program's
        declaration (:data:`stanaccel.observations.BUNDLED`).
    scale : bool
        Multiply the subset's log likelihood by N/m through the program's ``beta``.
    """
    if observations is None:
        name = model.name.removesuffix("_model")
        if name not in BUNDLED:
            raise ValueError(
                f"say which data of {name} are per observation: observations = {{count, fields}}"
            )
        observations = BUNDLED[name]
    observations = Observations.parse(observations)
    n = observations.check(data)
    _check_size(m, n, "the subset size m")
    indices = np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False))
    subset = observations.take(data, indices)
    if scale:
        subset["beta"] = float(data.get("beta", 1.0)) * n / m
    return model.with_data(subset)


def inducing_inputs(x: np.ndarray, m: int, *, seed: int = 0, method: str = "landmarks") -> np.ndarray:
    """m inducing inputs (m, D): a random subset of the rows of ``x``, or k-means centres."""
    x = np.asarray(x, dtype=float)
    _check_size(m, len(x), "the number of inducing inputs m")
    if method == "landmarks":
        return x[np.sort(np.random.default_rng(seed).choice(len(x), size=m, replace=False))]
    if method == "kmeans":
        from sklearn.cluster import KMeans

        return KMeans(n_clusters=m, n_init=1, random_state=seed).fit(x).cluster_centers_
    raise ValueError(f"unknown inducing-input method {method!r}; have 'landmarks', 'kmeans'")


def low_rank(
    data: dict[str, Any], m: int, *, kind: str = "fitc", seed: int = 0, method: str = "landmarks"
) -> StanModel:
    """The low-rank approximation of gp_ard's posterior with m inducing inputs."""
    if kind not in LOW_RANK_KINDS:
        raise ValueError(f"unknown low-rank approximation {kind!r}; have {list(LOW_RANK_KINDS)}")
    z = inducing_inputs(data["x"], m, seed=seed, method=method)
    lowrank_data = {**data, "beta": data.get("beta", 1.0), "M": m, "z": z, "fitc": int(kind == "fitc")}
    return StanModel(compile_program(program_path("gp_ard_lowrank")), lowrank_data)
