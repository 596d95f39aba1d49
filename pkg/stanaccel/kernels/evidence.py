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

The number is log Z(1) - log Z(0) whatever the program: it is log p(data)
only if ``beta`` multiplies the whole likelihood and the beta = 0 level is
the prior, which no check can tell from the program (a likelihood only
partly tempered leaves the rest in Z(0)), so every output says so beside it
(:data:`~stanaccel.diagnostics.metrics.EVIDENCE_MEANING`). What the draws can
tell is an improper beta = 0 level: a parameter with no proper density
there is a random walk that never settles, so the chains' points at that
level disagree or spread ever wider (:func:`prior_problem`), and
:func:`evidence_report` then gives no number.
"""

from __future__ import annotations

import numpy as np

from stanaccel.kernels.ladder import check_betas

PRIOR_RHAT_MAX = 1.1
"""The largest R-hat of the beta = 0 level's points (rank-normalised split R-hat over the chains, the worst
coordinate) with which an evidence is given. A proper prior explored well gives about 1.01, as a converged
posterior does (1.002 to 1.014 measured on three Stan programs); Stan programs with a parameter that no
term names, or one with no prior, gave 1.85 to 2.88 (their points reaching 1e20 where HMC's metric,
adapted on a posterior that drifts too, is huge)."""

PRIOR_GROWTH_MAX = 1.3
"""The largest growth of the beta = 0 level's spread (:func:`spread_growth`) with which an evidence is
given. A random walk's spread grows as the square root of its steps: from a common start, the last
quarter's is sqrt(7 / 3) = 1.53 times the second quarter's. Where swaps mix the drifting replicas the
chains agree (R-hat 1.09 to 1.29) while their spread grows (1.43 to 1.95 measured over 8 seeds of a
random-walk ladder with a flat coordinate); a proper prior gave 0.93 to 1.15, here and on Stan programs."""


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


def spread_growth(draws) -> float:
    """How much wider the last quarter of ``draws`` (chains, draws, dim) is than the second: the largest
    ratio over coordinates of their sds over the chains (inf where a coordinate still in the second
    quarter moves in the last; NaN with fewer than 4 draws, or nothing moving). The first quarter is left
    out, since a level started at the target's points spreads out at first."""
    draws = np.asarray(draws, dtype=float)
    quarter = draws.shape[1] // 4
    if quarter == 0:
        return float("nan")
    second, last = (draws[:, k * quarter : (k + 1) * quarter].reshape(-1, draws.shape[2]).std(axis=0)
                    for k in (1, 3))  # fmt: skip
    moving = (second > 0) | (last > 0)
    if not moving.any():
        return float("nan")
    with np.errstate(divide="ignore"):
        return float(np.max(last[moving] / second[moving]))


def prior_problem(draws) -> str | None:
    """Why the beta = 0 level's points say it has no normalised density (so no evidence), or None.

    Its chains disagree (R-hat above :data:`PRIOR_RHAT_MAX`), or its spread keeps growing
    (:func:`spread_growth` above :data:`PRIOR_GROWTH_MAX`): a parameter without a proper density there
    drifts without bound (or the level explores its density too slowly for an evidence).

    Parameters
    ----------
    draws : ndarray (chains, draws, dim)
        Each chain's points of the beta = 0 level, evenly spaced over its scans. One chain's R-hat is
        that of its two halves.
    """
    from stanaccel.diagnostics.metrics import worst_rhat  # ArviZ, loaded only when an evidence is asked for

    draws = np.asarray(draws, dtype=float)
    if not np.all(np.isfinite(draws)):
        return "the beta = 0 level reached points that are not finite: its density looks improper"
    half = draws.shape[1] // 2
    chains = draws if len(draws) > 1 else np.stack([draws[0, :half], draws[0, half : 2 * half]])
    rhat, growth = worst_rhat(chains), spread_growth(draws)
    if not (rhat > PRIOR_RHAT_MAX or growth > PRIOR_GROWTH_MAX):
        return None
    return (
        f"the beta = 0 level's draws did not settle: R-hat {rhat:.3g} (above {PRIOR_RHAT_MAX} the chains "
        f"disagree), spread {growth:.3g} times as wide in the last quarter of the draws as in the second "
        f"(above {PRIOR_GROWTH_MAX} it keeps growing), reaching {np.max(np.abs(draws)):.3g} in magnitude "
        "(unconstrained). Its density looks improper (a parameter without a proper prior), which has no "
        "evidence, or the level explores it too slowly for one; give every parameter a proper prior, or set "
        "beta_min (no evidence then)"
    )


def evidence_report(summaries: list) -> dict:
    """The evidence over chains from their kernel summaries, or why there is none; {} without one.

    Takes ``prior_draws`` out of each summary (they are for this check only). When
    :func:`prior_problem` finds the beta = 0 level improper, it takes out ``log_evidence`` and
    ``log_evidence_mcse`` too, so that no output shows a number.

    Returns
    -------
    dict
        ``log_evidence`` (the mean over chains; None when not given), ``log_evidence_mcse`` (the standard
        error of that mean, sqrt(sum of squares) / chains), ``description``
        (:data:`~stanaccel.diagnostics.metrics.EVIDENCE_MEANING`) and, when not given, ``not_given``
        (why).
    """
    from stanaccel.diagnostics.metrics import EVIDENCE_MEANING

    chains = [s for s in summaries if isinstance(s, dict) and "log_evidence" in s]
    if not chains:
        return {}
    points = [s.pop("prior_draws") for s in chains if "prior_draws" in s]
    problem = prior_problem([p[: min(map(len, points))] for p in points]) if points else None
    if problem:
        for summary in chains:
            del summary["log_evidence"], summary["log_evidence_mcse"]
        return no_evidence(problem)
    errors = np.array([s["log_evidence_mcse"] for s in chains])
    return {
        "log_evidence": float(np.mean([s["log_evidence"] for s in chains])),
        "log_evidence_mcse": float(np.sqrt(np.sum(errors**2)) / len(errors)),
        "description": EVIDENCE_MEANING,
    }


def no_evidence(reason: str) -> dict:
    """:func:`evidence_report`'s answer when the evidence is not given, and ``reason`` why."""
    from stanaccel.diagnostics.metrics import EVIDENCE_MEANING

    return {
        "log_evidence": None,
        "log_evidence_mcse": None,
        "description": EVIDENCE_MEANING,
        "not_given": reason,
    }
