"""Convergence as a run goes on: ESS and R-hat on growing prefixes of the draws.

A sampler that reaches R-hat 1.01 and a useful ESS in a tenth of its time
is a different tool from one that only gets there at the end; the final
numbers do not tell them apart. The time of a prefix is what was charged
before sampling (warm-up, training, tuning) plus the prefix's share of the
sampling time.
"""

from __future__ import annotations

import numpy as np

from stanaccel.diagnostics import convergence
from stanaccel.diagnostics._arviz import az
from stanaccel.diagnostics.metrics import scalar_draws

FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def convergence_by_prefix(
    idata: az.InferenceData,
    *,
    wall_seconds: float,
    sampling_seconds: float | None = None,
    fractions: tuple[float, ...] = FRACTIONS,
) -> dict[str, list[float]]:
    """Worst bulk ESS and worst R-hat of the first fraction of every chain's draws.

    Parameters
    ----------
    idata : InferenceData
        The run; its posterior group is used.
    wall_seconds : float
        The run's whole time.
    sampling_seconds : float, optional
        The part of it that grows with the draws; the rest (``wall_seconds -
        sampling_seconds``) was spent before the first draw. Default: all of it.

    Returns
    -------
    dict
        ``fraction``, ``draws`` (per chain), ``seconds``, ``ess_bulk_min``
        and ``rhat_max``: lists, one entry per prefix of at least 4 draws.
    """
    posterior = idata.posterior
    n = posterior.sizes["draw"]
    sampling = wall_seconds if sampling_seconds is None else sampling_seconds
    before = max(wall_seconds - sampling, 0.0)
    out: dict[str, list[float]] = {
        k: [] for k in ("fraction", "draws", "seconds", "ess_bulk_min", "rhat_max")
    }
    draws, _ = scalar_draws(posterior)
    for fraction in fractions:
        k = int(round(fraction * n))
        if k < 4:
            continue
        ess = _worst(convergence.ess_bulk(draws[:, :k]), np.nanmin)
        rhat = _worst(convergence.rhat(draws[:, :k]), np.nanmax)
        out["fraction"].append(k / n)
        out["draws"].append(k)
        out["seconds"].append(before + sampling * k / n)
        out["ess_bulk_min"].append(ess)
        out["rhat_max"].append(rhat)
    return out


def _worst(values: np.ndarray, reduce) -> float:
    return float(reduce(values)) if values.size and not np.all(np.isnan(values)) else float("nan")
