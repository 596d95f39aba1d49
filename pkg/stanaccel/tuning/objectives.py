"""Objectives a tuner maximises, measured on a short chain's statistic.

The statistic is a scalar per draw (the log density, one coordinate, a
magnetisation), as a series of draws or (chains, draws). The autocorrelation
and ESS come from :mod:`stanaccel.diagnostics` (ArviZ).
"""

from __future__ import annotations

import numpy as np

from stanaccel.diagnostics import autocorrelation, bulk_ess


def _chains(series, shortest: int) -> np.ndarray:
    """``series`` as (chains, draws), checked: finite and at least ``shortest`` draws per chain."""
    array = np.asarray(series, dtype=float)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"expected a series of draws or (chains, draws), not shape {array.shape}")
    if array.shape[1] < shortest:
        raise ValueError(
            f"the series has {array.shape[1]} draws per chain; this objective needs at least {shortest}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError("the series has non-finite values (NaN or infinity)")
    return array


def autocorrelation_objective(series, max_lag: int = 100) -> float:
    """One minus the mean absolute autocorrelation over lags 1..``max_lag``: the objective of Mahendran et al.

    Near 1 for nearly independent draws, 0 for a stuck (constant) chain,
    the worst. With several chains the autocorrelation is averaged over
    the chains at each lag before its absolute value is taken.

    Parameters
    ----------
    series : array (draws,) or (chains, draws)
        A scalar statistic of each draw; at least ``max_lag + 2`` draws per chain.
    max_lag : int
        The largest lag (the paper's 100).
    """
    if max_lag < 1:
        raise ValueError(f"max_lag must be at least 1, not {max_lag}")
    chains = _chains(series, max_lag + 2)
    rho = autocorrelation(chains, max_lag)[:, 1:].mean(axis=0)
    return float(1.0 - np.mean(np.abs(rho)))


def ess_per_second(series, seconds: float) -> float:
    """Bulk ESS of the statistic over the chains per second of the run (0 for a stuck chain)."""
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, not {seconds!r}")
    return _ess(series) / seconds


def ess_per_gradient(series, gradients: int) -> float:
    """Bulk ESS of the statistic over the chains per gradient evaluation (0 for a stuck chain)."""
    if not gradients > 0:
        raise ValueError(f"gradients must be positive, not {gradients!r}")
    return _ess(series) / gradients


def _ess(series) -> float:
    chains = _chains(series, 4)
    # ArviZ gives a constant series the full ESS; a stuck chain has none.
    return 0.0 if np.ptp(chains) == 0 else bulk_ess(chains)
