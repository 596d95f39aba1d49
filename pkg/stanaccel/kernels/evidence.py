"""The evidence by stepping stone over a tempering ladder.

For a power ladder h_beta = prior x likelihood^beta with normaliser
Z(beta) = int prior L^beta, each pair of neighbouring levels gives

    Z(beta_m) / Z(beta_m+1) = E_{beta_m+1}[ L(x)^(beta_m - beta_m+1) ],

an expectation under the hotter level, whose draws parallel tempering keeps
anyway (Xie, Lewis, Fan, Kuo and Chen 2011; Pigeons.jl reports the same). The
product over the ladder is Z(1) / Z(beta_last): with beta_last = 0 and a prior
that integrates to 1, the evidence Z = p(data). The hotter level's draws are
used (the forward estimator) because L^(beta_m - beta_m+1) is bounded where
the likelihood is, so its mean has a finite variance; the backward one
(L^-(...) under the colder level) need not.

The Monte Carlo standard error is the delta method's on the whole sum: log Z-hat
moves with sum_m (w_m - r_m) / r_m, where w_m is pair m's weight at one scan
and r_m its mean, so the error is the Monte Carlo standard error of the mean
of that per-scan series (ArviZ, from its effective sample size). Taking the
pairs together matters: swaps correlate neighbouring levels, and adding the
pairs' errors as if independent understated the spread of the estimates
between chains by a factor of about 2.
"""

from __future__ import annotations

import numpy as np

from stanaccel.kernels.ladder import check_betas


def stepping_stone(betas, log_likelihoods) -> tuple[float, float]:
    """log Z(1) - log Z(beta_last) and its Monte Carlo standard error.

    Parameters
    ----------
    betas : array
        The ladder, 1 down to beta_last.
    log_likelihoods : ndarray (draws, levels) or (chains, draws, levels)
        log L at each level's point after each scan.
    """
    from stanaccel.diagnostics.metrics import mcse_mean  # ArviZ, loaded only when an evidence is asked for

    betas = check_betas(betas)
    values = np.asarray(log_likelihoods, dtype=float)
    values = values[None] if values.ndim == 2 else values
    if values.ndim != 3 or values.shape[2] != len(betas):
        raise ValueError(f"need log likelihoods (draws, {len(betas)} levels), not shape {values.shape}")
    if values.shape[1] < 4:
        raise ValueError(f"stepping stone needs at least 4 draws per level, not {values.shape[1]}")
    log_z, influence = 0.0, np.zeros(values.shape[:2])
    for m in range(len(betas) - 1):
        exponent = (betas[m] - betas[m + 1]) * values[:, :, m + 1]
        shift = float(np.max(exponent))
        weights = np.exp(exponent - shift)
        mean = float(np.mean(weights))
        log_z += shift + np.log(mean)
        influence += weights / mean - 1
    error = mcse_mean(influence) if np.ptp(influence) > 0 else 0.0
    return float(log_z), float(error)
