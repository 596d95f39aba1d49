"""Convergence and efficiency figures from draws (ArviZ, rank-normalised).

Efficiency is ESS per second: the smallest bulk ESS over all scalar
parameters divided by the wall time the method needed (see DESIGN.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel.diagnostics._arviz import az


def summary(idata: az.InferenceData, var_names: list[str] | None = None):
    """ArviZ's summary table (mean, sd, HDI, MCSE, ESS bulk and tail, R-hat)."""
    return az.summary(idata, var_names=var_names)


def _flat(dataset) -> dict[str, float]:
    """Scalar values of a per-parameter ArviZ dataset, named ``var[i,j]``."""
    out = {}
    for name, array in dataset.data_vars.items():
        values = np.atleast_1d(array.values)
        if array.ndim == 0:
            out[name] = float(values[0])
            continue
        for index in np.ndindex(array.shape):  # named by coordinates, as summary() names its rows
            labels = [
                array[dim].values[i] if dim in array.coords else i
                for dim, i in zip(array.dims, index, strict=True)
            ]
            out[f"{name}[{','.join(map(str, labels))}]"] = float(array.values[index])
    return out


def convergence_metrics(
    idata: az.InferenceData,
    *,
    wall_seconds: float | None = None,
    sampling_seconds: float | None = None,
    gradient_evaluations: int | None = None,
    var_names: list[str] | None = None,
) -> dict[str, Any]:
    """ESS (bulk, tail), R-hat and ESS per second of the posterior group.

    Returns a JSON-ready dict: the worst case over parameters
    (``ess_bulk_min``, ``ess_tail_min``, ``rhat_max``), per-parameter values,
    and ``ess_per_second`` (total time) and ``ess_per_second_sampling``.
    """
    posterior = idata.posterior if var_names is None else idata.posterior[var_names]
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    ess_bulk = _flat(az.ess(posterior, method="bulk"))
    ess_tail = _flat(az.ess(posterior, method="tail"))
    rhat = _flat(az.rhat(posterior)) if n_chains > 1 else {k: float("nan") for k in ess_bulk}
    bulk_min = min(ess_bulk.values()) if ess_bulk else float("nan")
    metrics: dict[str, Any] = {
        "chains": int(n_chains),
        "draws_per_chain": int(n_draws),
        "ess_bulk_min": bulk_min,
        "ess_tail_min": min(ess_tail.values()) if ess_tail else float("nan"),
        "rhat_max": max(rhat.values()) if rhat else float("nan"),
        "ess_bulk": ess_bulk,
        "ess_tail": ess_tail,
        "rhat": rhat,
    }
    if wall_seconds is not None:
        metrics["wall_seconds"] = wall_seconds
        metrics["ess_per_second"] = bulk_min / wall_seconds
    if sampling_seconds is not None:
        metrics["sampling_seconds"] = sampling_seconds
        metrics["ess_per_second_sampling"] = bulk_min / sampling_seconds
    if gradient_evaluations is not None:
        metrics["gradient_evaluations"] = int(gradient_evaluations)
        metrics["ess_per_1000_gradients"] = 1000 * bulk_min / max(gradient_evaluations, 1)
    return metrics


def mcse_z_scores(
    idata: az.InferenceData, var_name: str, true_mean: np.ndarray, true_sd: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Errors of posterior mean and sd estimates in units of their Monte Carlo standard error.

    |z| below about 3.5 is what a correct sampler gives with high probability.
    """
    draws = idata.posterior[var_name]
    mean = draws.mean(dim=("chain", "draw")).values
    sd = draws.std(dim=("chain", "draw")).values
    mcse_mean = az.mcse(idata, var_names=[var_name], method="mean")[var_name].values
    mcse_sd = az.mcse(idata, var_names=[var_name], method="sd")[var_name].values
    return (mean - true_mean) / mcse_mean, (sd - true_sd) / mcse_sd


def reference_z_scores(idata: az.InferenceData, reference: az.InferenceData) -> np.ndarray:
    """Differences of posterior means and sds from a reference run, in combined MCSE units.

    For checking a sampler against a long run of another (Stan NUTS) when the
    exact answer is unknown: z = (estimate - reference) / sqrt(mcse^2 +
    mcse_reference^2), for the mean and the sd of every scalar in the
    posterior group. Returns (2, n_scalars): means, then sds.
    """
    out = []
    for method in ("mean", "sd"):
        a, b = idata.posterior, reference.posterior
        reduce = (
            (lambda d: d.mean(dim=("chain", "draw")))
            if method == "mean"
            else (lambda d: d.std(dim=("chain", "draw")))
        )
        se = np.sqrt(az.mcse(a, method=method) ** 2 + az.mcse(b, method=method) ** 2)
        z = (reduce(a) - reduce(b)) / se
        out.append(np.concatenate([np.ravel(z[v].values) for v in z.data_vars]))
    return np.array(out)


def rhat_trace(draws: np.ndarray, points: int = 12) -> list[tuple[int, float]]:
    """Median R-hat over coordinates against the number of draws.

    ``draws`` is (chains, draws, dim). For each prefix length k (on a grid up
    to all draws) the first half of the prefix is discarded as burn-in, as in
    the tempering-by-subsampling paper, and the rank-normalised R-hat of the
    rest is taken per coordinate.
    """
    n = draws.shape[1]
    lengths = sorted({int(k) for k in np.geomspace(min(20, n), n, points) if k >= 8})
    out = []
    for k in lengths:
        part = draws[:, k // 2 : k]
        values = [float(az.rhat(part[:, :, i])) for i in range(draws.shape[2])]
        out.append((k, float(np.median(values))))
    return out


def autocorrelation(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelation of a scalar statistic at lags 0..max_lag, per chain (ArviZ's FFT estimate).

    ``series`` is (chains, draws); returns (chains, max_lag + 1). A constant
    chain has no defined autocorrelation; it is returned as 1 at every lag,
    since a stuck chain's draws are all the same.
    """
    series = np.asarray(series, dtype=float)
    out = np.ones((series.shape[0], max_lag + 1))
    moving = np.ptp(series, axis=1) > 0
    if np.any(moving):
        out[moving] = az.autocorr(series[moving], axis=-1)[:, : max_lag + 1]
    return out


def bulk_ess(series: np.ndarray) -> float:
    """The rank-normalised bulk ESS of a scalar statistic over chains, ``series`` (chains, draws)."""
    return float(az.ess(np.asarray(series, dtype=float), method="bulk"))


def mcse_mean(series: np.ndarray) -> float:
    """The Monte Carlo standard error of the mean of a scalar statistic, ``series`` (chains, draws)."""
    return float(az.mcse(np.asarray(series, dtype=float), method="mean"))
