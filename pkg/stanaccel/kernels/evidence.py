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
random-walk ladder with a flat coordinate); a proper prior gave 0.93 to 1.15, here and on Stan programs,
at 600 draws or more. At fewer the two quarters' sds differ by chance as much (up to 1.33 on ``mvn_mean``
at 300 draws), so a growth counts only where it is :data:`PRIOR_GROWTH_Z` standard errors as well."""

PRIOR_GROWTH_Z = 3.5
"""Standard errors of the log of a coordinate's spread growth (:func:`spread_growth`, from the Monte Carlo
errors of the two quarters' variances) by which it must exceed 0 to count. A proper level's log growth is
about normal about 0 with that error, but quarters of a few hundred draws see too little of the draws'
autocorrelation, so their errors run small: ``mvn_mean`` at 300 draws gave up to 3.2 errors (8 seeds, 3
coordinates), the random-walk ladder's proper prior up to 2.0; its flat coordinate's random walk gave 1.9
to 4.6 at 600 draws, where R-hat refused every seed below 3.5 (8 seeds)."""


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


def spread_growth(draws) -> tuple[np.ndarray, np.ndarray]:
    """How much wider the last quarter of ``draws`` (chains, draws, dim) is than the second, per coordinate:
    the ratio of their sds over the chains, and how many standard errors its log lies above 0.

    The first quarter is left out, since a level started at the target's points spreads out at first.
    The log ratio's standard error is the delta method's, from each quarter's Monte Carlo standard error of
    its mean squared deviation (so it knows the draws' autocorrelation). A coordinate still in the second
    quarter that moves in the last has ratio and errors inf; one moving in neither, NaN (as with fewer than
    4 draws).
    """
    from stanaccel.diagnostics.metrics import mcse_mean  # ArviZ, loaded only when an evidence is asked for

    draws = np.asarray(draws, dtype=float)
    quarter = draws.shape[1] // 4
    growth, errors = np.full(draws.shape[2], np.nan), np.full(draws.shape[2], np.nan)
    if quarter == 0:
        return growth, errors
    for j in range(draws.shape[2]):
        spread, relative = [], []
        for k in (1, 3):
            part = draws[:, k * quarter : (k + 1) * quarter, j]
            squares = (part - part.mean()) ** 2
            variance = float(squares.mean())
            spread.append(np.sqrt(variance))
            moving = variance > 0 and np.ptp(squares) > 0 and quarter > 1
            relative.append(mcse_mean(squares) / variance if moving else 0.0)  # that of the sd is half
        if spread[0] == spread[1] == 0:
            continue
        with np.errstate(divide="ignore"):
            growth[j] = spread[1] / spread[0]
            error = 0.5 * np.hypot(*relative)
            errors[j] = np.log(growth[j]) / error if error > 0 else np.inf * np.sign(np.log(growth[j]))
    return growth, errors


def unsettled(draws) -> str | None:
    """Why the points ``draws`` (chains, draws, dim) of a density did not settle, or None if they did.

    Its chains disagree (R-hat above :data:`PRIOR_RHAT_MAX`), or its spread keeps growing (in some
    coordinate, :func:`spread_growth` above :data:`PRIOR_GROWTH_MAX` and :data:`PRIOR_GROWTH_Z` standard
    errors). One chain's R-hat is that of its two halves.
    """
    from stanaccel.diagnostics.metrics import worst_rhat  # ArviZ, loaded only when an evidence is asked for

    draws = np.asarray(draws, dtype=float)
    if not np.all(np.isfinite(draws)):
        return "they reached points that are not finite"
    half = draws.shape[1] // 2
    chains = draws if len(draws) > 1 else np.stack([draws[0, :half], draws[0, half : 2 * half]])
    rhat = worst_rhat(chains)
    growth, errors = spread_growth(draws)
    growing = (growth > PRIOR_GROWTH_MAX) & (errors > PRIOR_GROWTH_Z)
    if not (rhat > PRIOR_RHAT_MAX or growing.any()):
        return None
    found = (
        [f"R-hat {rhat:.3g} (above {PRIOR_RHAT_MAX}: the chains disagree)"] if rhat > PRIOR_RHAT_MAX else []
    )
    if growing.any():
        worst = int(np.argmax(np.where(growing, errors, -np.inf)))
        found.append(
            f"spread {growth[worst]:.3g} times as wide in the last quarter of the draws as in the second, "
            f"{errors[worst]:.3g} standard errors above equal (above {PRIOR_GROWTH_MAX} and "
            f"{PRIOR_GROWTH_Z:g} errors: it keeps growing)"
        )
    return f"{'; '.join(found)}; reaching {np.max(np.abs(draws)):.3g} in magnitude (unconstrained)"


def prior_problem(draws) -> str | None:
    """Why the beta = 0 level's points say it has no normalised density (so no evidence), or None.

    They did not settle (:func:`unsettled`): a parameter without a proper density there drifts without
    bound (or the level explores its density too slowly for an evidence).

    Parameters
    ----------
    draws : ndarray (chains, draws, dim)
        Each chain's points of the beta = 0 level, evenly spaced over its scans.
    """
    draws = np.asarray(draws, dtype=float)
    if not np.all(np.isfinite(draws)):
        return "the beta = 0 level reached points that are not finite: its density looks improper"
    problem = unsettled(draws)
    if problem is None:
        return None
    return (
        f"the beta = 0 level's draws did not settle: {problem}. Its density looks improper (a parameter "
        "without a proper prior), which has no evidence, or the level explores it too slowly for one; give "
        "every parameter a proper prior, or set beta_min (no evidence then)"
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
