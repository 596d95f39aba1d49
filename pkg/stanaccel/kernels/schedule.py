"""An adaptive tempering schedule: betas that equalise the swap rejection rates.

Syed, Bouchard-Côté, Deligiannidis and Doucet (JRSSB 2022), as Pigeons.jl
runs it. Parallel tempering is run in rounds of doubling length; after each,
the swap rejection rate r_m of each neighbouring pair estimates the local
communication barrier, and their running sum over the betas from the hottest
level up is the cumulative barrier Lambda(beta). Its total, Lambda = Lambda(1),
is the global communication barrier: how hard the ladder is to cross, whatever
its number of levels. The next round's betas are spaced equally in
Lambda(beta) (a monotone interpolation of the cumulative sums), so that every
pair rejects about Lambda / (levels - 1) of its swaps.

With non-reversible (even/odd) swaps and levels that explore their own
density well, the rate of round trips per scan (all replicas together) is
1 / (2 + 2 sum_m r_m / (1 - r_m)), which rises with the number of levels to
1 / (2 + 2 Lambda). :func:`levels_for_barrier` takes the fewest levels whose
rate is within 20% of that limit: a ladder with more levels costs more per scan
and gains less than a fifth in round trips.

The theory's rate assumes that each level's inner move explores its own
density well between swaps. A step that suits the target is too long at the
hot levels of a Stan program, whose prior is far wider than the tempered
likelihood allows for (beta^(-1/2) widening overshoots there), so the rounds
also adapt each level's step: given ``inner_target``, a factor on the level's
inner step rises or falls with its measured acceptance
(:data:`STEP_GAIN`), and moves with the betas.

Adaptation happens before the kept draws (a warm-up of the schedule); the kept
draws use one fixed ladder and fixed steps, so they are an exact Markov chain.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri  # the standard normal's quantile, norm.ppf, without scipy.stats

from stanaccel.kernels.ladder import check_betas, subset_betas

ROUNDS = 8
"""Rounds of adaptation by default: 2 + 4 + ... + 256 = 510 scans."""

RATE_SHARE = 0.8
"""The share of the limit 1 / (2 + 2 Lambda) that the chosen number of levels reaches in theory."""

FIRST_RESIZE = 4
"""The first round (16 scans) whose barrier sets the number of levels; the shorter ones only re-space them."""

STEP_GAIN = 1.5
"""After a round, log(step factor) of a level moves by STEP_GAIN (acceptance - target), at most log 2."""

MIN_LEVELS, MAX_LEVELS = 3, 64
"""The fewest and most levels :func:`levels_for_barrier` chooses (the target and the reference included)."""

SMALLEST_REJECTION = 1e-3
"""Floor of a pair's rejection rate in the cumulative barrier, so that it rises strictly and inverts."""


def cumulative_barrier(betas, rejection) -> tuple[np.ndarray, np.ndarray]:
    """Lambda(beta) at the ladder's betas: (betas ascending, cumulative sums of rejection from the top).

    ``betas`` decrease from 1 (the target, level 0); ``rejection[m]`` is the
    rate of pair (m, m + 1).
    """
    betas = check_betas(betas)
    rejection = np.asarray(rejection, dtype=float)
    if rejection.shape != (len(betas) - 1,):
        raise ValueError(f"{len(betas)} levels need {len(betas) - 1} rejection rates, not {rejection.shape}")
    floored = np.maximum(rejection[::-1], SMALLEST_REJECTION)
    return betas[::-1], np.concatenate([[0.0], np.cumsum(floored)])


def equalised_betas(
    betas, rejection, n_levels: int, n_obs: int | None = None, span: float = 1.0
) -> np.ndarray:
    """``n_levels`` betas from 1 down to the ladder's last, equally spaced in the cumulative barrier.

    ``n_obs``: a subsampled ladder's observations; the betas are then whole subset sizes
    (:func:`~stanaccel.kernels.ladder.subset_betas`), and may be fewer than ``n_levels``.
    ``span``: the share of the barrier covered, from the target down (below 1: a shorter ladder).
    """
    if n_levels < 2:
        raise ValueError(f"a ladder needs at least 2 levels, not {n_levels}")
    if not 0 < span <= 1:
        raise ValueError(f"span is a share of the barrier in (0, 1], not {span}")
    ascending, barrier = cumulative_barrier(betas, rejection)
    from scipy.interpolate import PchipInterpolator  # here: its import is a third of a second

    beta_of = PchipInterpolator(barrier, ascending)  # monotone: the betas stay ordered
    new = beta_of(np.linspace(barrier[-1], (1 - span) * barrier[-1], n_levels))
    new[0] = 1.0
    if span == 1:
        new[-1] = ascending[0]
    return check_betas(new) if n_obs is None else subset_betas(new, n_obs)


def round_trip_rate(rejection) -> float:
    """Round trips per scan of non-reversible PT with these pair rejection rates, in theory:
    1 / (2 + 2 sum r / (1 - r)) (Syed et al. 2022, Theorem 3; local exploration assumed perfect)."""
    r = np.minimum(np.asarray(rejection, dtype=float), 1 - 1e-12)
    return float(1.0 / (2.0 + 2.0 * np.sum(r / (1.0 - r))))


def limit_rate(barrier: float) -> float:
    """1 / (2 + 2 Lambda): the round-trip rate of non-reversible PT with many levels."""
    return 1.0 / (2.0 + 2.0 * barrier)


def levels_for_barrier(barrier: float, share: float = RATE_SHARE) -> int:
    """The fewest levels whose equal rejection rates Lambda / (levels - 1) give ``share`` of the limit rate.

    With n pairs each rejecting Lambda / n, the rate is 1 / (2 + 2 Lambda / (1 - Lambda / n)),
    at least ``share`` of 1 / (2 + 2 Lambda) once n >= Lambda / (1 - Lambda / A),
    A = (1 + Lambda) / share - 1. Clipped to [:data:`MIN_LEVELS`, :data:`MAX_LEVELS`].
    """
    if not np.isfinite(barrier) or barrier <= 0:
        return MIN_LEVELS
    allowed = (1 + barrier) / share - 1
    pairs = barrier / (1 - barrier / allowed)
    return int(np.clip(np.ceil(pairs) + 1, MIN_LEVELS, MAX_LEVELS))


TRAJECTORY_ACCEPTANCE = 0.3
"""The tempered-transition acceptance :func:`levels_for_trajectories` aims at."""


def levels_for_trajectories(barrier: float, acceptance: float = TRAJECTORY_ACCEPTANCE) -> int:
    """Levels of a tempered-transition ladder, spaced equally in the barrier, whose trajectories are
    accepted with probability about ``acceptance``.

    A model, not a theorem: if each pair's log ratio is Gaussian with mean -mu and variance 2 mu (the
    usual shape of such ratios), a swap is refused with probability about sqrt(mu / pi) when small,
    so n pairs of a barrier Lambda have mu = pi Lambda^2 / n^2. A trajectory adds the n pairs' log
    ratios, accepted with probability 2 Phi(-sqrt(n mu / 2)), hence
    n = pi Lambda^2 / (2 Phi^-1(acceptance / 2)^2): a trajectory needs levels in the square of the
    barrier, where parallel tempering needs them in proportion to it (Neal 1996 saw the same).
    Clipped to [:data:`MIN_LEVELS`, :data:`MAX_LEVELS`].
    """
    if not np.isfinite(barrier) or barrier <= 0:
        return MIN_LEVELS
    pairs = np.pi * barrier**2 / (2 * ndtri(acceptance / 2) ** 2)
    return int(np.clip(np.ceil(pairs) + 1, MIN_LEVELS, MAX_LEVELS))


def levels_for_acceptance(levels: int, measured: float, acceptance: float = TRAJECTORY_ACCEPTANCE) -> int:
    """Levels for trajectory ``acceptance``, from ``measured`` acceptance with ``levels`` levels.

    The model of :func:`levels_for_trajectories` says n mu = 2 Phi^-1(a / 2)^2 falls as 1 / n, so the
    levels scale by (Phi^-1(measured / 2) / Phi^-1(acceptance / 2))^2. A pilot's measured acceptance
    corrects the barrier's count for what the model leaves out, chiefly inner moves that explore
    their level less than perfectly (on a Stan program it accepted 0.11, not 0.3).
    """
    measured = float(np.clip(measured, 1e-3, 0.999))
    ratio = (ndtri(measured / 2) / ndtri(acceptance / 2)) ** 2
    return int(np.clip(np.ceil(1 + (levels - 1) * ratio), MIN_LEVELS, MAX_LEVELS))


def trajectory_span(
    levels: int, measured: float, most: int, acceptance: float = TRAJECTORY_ACCEPTANCE
) -> float:
    """The share of the barrier, from the target down, that trajectories over ``most`` levels cross with
    probability about ``acceptance``, from ``measured`` acceptance with ``levels`` levels over all of it;
    1 when ``most`` levels are enough.

    By the model of :func:`levels_for_trajectories`, the barrier that n pairs cross with acceptance a is
    |Phi^-1(a / 2)| sqrt(2 n / pi): in the square root of the levels.
    """
    measured = float(np.clip(measured, 1e-3, 0.999))
    share = ndtri(acceptance / 2) / ndtri(measured / 2) * np.sqrt((most - 1) / (levels - 1))
    return float(min(1.0, share))


@dataclass
class Round:
    """One round of adaptation: its ladder and what the swaps said about it (pooled over chains)."""

    scans: int
    betas: list[float]
    rejection: list[float]
    barrier: float
    round_trips: int
    round_trip_rate: float  # measured, per scan and chain
    theoretical_rate: float  # round_trip_rate(rejection)
    inner_acceptance: list[float] | None = None  # per level, with ``step_factors``: what the round used
    step_factors: list[float] | None = None

    def line(self) -> str:
        """A line for the log."""
        return (
            f"{self.scans} scans, {len(self.betas)} levels: barrier {self.barrier:.2f}, max rejection "
            f"{max(self.rejection):.2f}, {self.round_trips} round trips "
            f"({self.round_trip_rate:.3f} a scan; theory {self.theoretical_rate:.3f})"
            + ("" if self.inner_acceptance is None else f", inner acceptance {min(self.inner_acceptance):.2f}"
               f" to {max(self.inner_acceptance):.2f}")
        )  # fmt: skip


@dataclass
class Schedule:
    """What :func:`adapt_schedule` found: the ladder for the kept draws, and every round's report."""

    betas: np.ndarray
    barrier: float
    rounds: list[Round] = field(default_factory=list)
    replicas: np.ndarray | None = (
        None  # each chain's replicas at the end, mapped to ``betas`` (chains, levels, dim)
    )

    positions: np.ndarray | None = None  # each chain's point at the target level (chains, dim)
    step_factors: np.ndarray | None = None  # each level's factor on its inner step (None: not adapted)
    trajectory_pilot: dict | None = None  # tempered transitions: the pilot's levels and acceptance
    note: str = ""  # what the caller changed, said in the report

    def report(self) -> dict:
        """Plain values for ``metrics.json`` and the report."""
        return {
            "betas": [float(b) for b in self.betas],
            "levels": len(self.betas),
            "barrier": self.barrier,
            "limit_round_trip_rate": limit_rate(self.barrier),
            **(
                {"step_factors": [float(f) for f in self.step_factors]}
                if self.step_factors is not None
                else {}
            ),
            "rounds": [vars(r) for r in self.rounds],
            **({"trajectory_pilot": self.trajectory_pilot} if self.trajectory_pilot else {}),
            **({"note": self.note} if self.note else {}),
        }


def adapt_schedule(
    make_pt: Callable[[np.ndarray, np.ndarray], object],
    starts: np.ndarray,
    rngs: list[np.random.Generator],
    betas,
    *,
    rounds: int = ROUNDS,
    n_levels: int | None = None,
    inner_target: float | None = None,
    n_obs: int | None = None,
    say: Callable[[str], None] | None = None,
) -> Schedule:
    """Run ``rounds`` rounds of PT (2, 4, ..., 2^rounds scans per chain) from ``betas``, re-spacing the betas
    after each.

    Parameters
    ----------
    make_pt : callable (betas, step_factors) -> ParallelTempering
        A PT kernel over the ladder with these betas, each level's inner step multiplied by its factor
        (fresh for each round; one per chain).
    starts : ndarray (chains, dim)
        Each chain's start; a later round starts each replica where the last round left it.
    rngs : list of Generator
        One per chain.
    betas : array
        The first round's ladder (1 down to the reference's beta).
    n_levels : int, optional
        Keep this many levels; by default :func:`levels_for_barrier` of each round's barrier.
    inner_target : float, optional
        The inner moves' acceptance that each level's step factor is adapted to; None: factors of 1.
    n_obs : int, optional
        A subsampled ladder's number of observations: its betas are kept to whole subset sizes.
    """
    say = say or (lambda line: None)
    betas = check_betas(betas) if n_obs is None else subset_betas(betas, n_obs)
    if len(rngs) != len(np.atleast_2d(starts)):
        raise ValueError(f"{len(rngs)} generators for {len(np.atleast_2d(starts))} chains")
    starts = np.atleast_2d(np.asarray(starts, dtype=float))
    replicas: list[np.ndarray | None] = [None] * len(starts)
    factors = np.ones(len(betas))
    report: list[Round] = []
    barrier = float("nan")
    for r in range(1, rounds + 1):
        scans = 2**r
        states = _run_round([make_pt(betas, factors) for _ in starts], starts, replicas, rngs, scans)
        attempts = sum(s.extra["swap_attempts"] for s in states)
        accepts = sum(s.extra["swap_accepts"] for s in states)
        rejection = 1 - accepts / np.maximum(attempts, 1)
        barrier = float(np.sum(rejection))
        trips = int(sum(s.extra["round_trips"] for s in states))
        done = Round(scans, betas.tolist(), rejection.tolist(), barrier, trips,
                     trips / (scans * len(states)), round_trip_rate(rejection))  # fmt: skip
        if inner_target is not None:
            accepted = sum(s.extra["level_accepts"] for s in states) / (scans * len(states))
            done.inner_acceptance, done.step_factors = accepted.tolist(), factors.tolist()
            factors = factors * np.exp(np.clip(STEP_GAIN * (accepted - inner_target), -np.log(2), np.log(2)))
        report.append(done)
        say(f"schedule round {r}: {done.line()}")
        replicas = [np.stack([p.position for p in s.extra["replicas"]]) for s in states]
        levels = n_levels or (levels_for_barrier(barrier) if r >= FIRST_RESIZE else len(betas))
        old, betas = betas, equalised_betas(betas, rejection, levels, n_obs)
        replicas = [_moved(x, old, betas) for x in replicas]
        factors = factors_at(old, factors, betas)
    return Schedule(betas, barrier, report, np.stack(replicas), np.stack([x[0] for x in replicas]),
                    step_factors=factors if inner_target is not None else None)  # fmt: skip


def factors_at(betas, factors, new_betas) -> np.ndarray:
    """Step factors found at ``betas``, carried to ``new_betas``: interpolated in log(factor) over beta."""
    ascending = np.asarray(betas, dtype=float)[::-1]
    logs = np.log(np.asarray(factors, dtype=float))[::-1]
    return np.exp(np.interp(np.asarray(new_betas, dtype=float), ascending, logs))


def _run_round(kernels: list, starts: np.ndarray, replicas: list, rngs: list, scans: int) -> list:
    """Each chain's PT state after ``scans`` scans from its replicas (or its start), chains in threads."""

    def run(c: int):
        here = replicas[c]
        state = kernels[c].init(starts[c] if here is None else here[0], replicas=here)
        for _ in range(scans):
            state, _ = kernels[c].step(state, rngs[c])
        return state

    with ThreadPoolExecutor(len(starts)) as pool:
        return list(pool.map(run, range(len(starts))))


def _moved(replicas: np.ndarray, old, new) -> np.ndarray:
    """Each new level's start: the replica of the old level nearest in beta."""
    nearest = np.abs(np.asarray(old)[None, :] - np.asarray(new)[:, None]).argmin(axis=1)
    return replicas[nearest]
