"""The tempering ladder of ``pt``, ``spt``, ``tt`` and ``stt`` placed on the user's program before the
draws.

:mod:`stanaccel.kernels.schedule` does the work: rounds of parallel
tempering of doubling length, after each the betas re-spaced to equal swap
rejection rates and the number of levels chosen from the estimated global
barrier Lambda. Tempered transitions (``tt``, ``stt``) run the same rounds
as a pilot, with their own inner moves, and take the pilot's cumulative
barrier with the number of levels their trajectories need
(:func:`~stanaccel.kernels.schedule.levels_for_trajectories`: in the square
of the barrier). What this module decides is what the settings mean:

- ``betas`` given, or ``levels`` and ``beta_min`` both (the geometric
  ladder beta_min^(m / levels), as the papers' studies give it), or
  ``schedule_rounds = 0``: that ladder, as given (no adaptation).
- ``levels`` alone: that many levels above the target, their betas placed.
- the ladder's hot end: beta = 0 on a power ladder (the prior, so that
  ``pt`` also reports the evidence by stepping stone) unless ``beta_min``
  is given; a subsampled ladder (``spt``, ``stt``) keeps ``beta_min``, since
  a subset of no observations is not a data set every program accepts.

The first round starts from betas spaced evenly between 1 and that end
(Pigeons.jl starts so too). The rounds also adapt each level's factor on its
inner step (HMC) or scale (MH) to :data:`INNER_ACCEPTANCE`; the draws use the
placed ``betas`` and ``step_factors``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from stanaccel.kernels import run_chains
from stanaccel.kernels.schedule import (
    TRAJECTORY_ACCEPTANCE,
    Schedule,
    adapt_schedule,
    equalised_betas,
    factors_at,
    levels_for_acceptance,
    levels_for_trajectories,
)
from stanaccel.sampling.build import KernelFactory
from stanaccel.sampling.config import PTConfig, SamplerConfig, TTConfig
from stanaccel.sampling.methods import inner_move

INNER_ACCEPTANCE = {"hmc": 0.8, "mh": 0.3}
"""The acceptance each level's inner move is adapted to while the ladder is placed: HMC's at the end of a
trajectory (NUTS's target; the warm-up's step gave 0.9 at the target and 0.3 at the hot end of a Stan
program's ladder), random-walk Metropolis's about the 0.234 of high dimensions."""

TRAJECTORY_PILOT = 64
"""Iterations per chain of the tempered-transition pilot that corrects the number of levels."""


def adapts_schedule(config: SamplerConfig) -> bool:
    """Whether ``config`` (resolved) asks for a placed ladder: a tempering method given no ladder (see the
    module docstring)."""
    if not isinstance(config, PTConfig | TTConfig) or config.betas is not None:
        return False
    return config.schedule_rounds > 0 and not {"levels", "beta_min"} <= config.user_keys()


def starting_betas(config: PTConfig | TTConfig, to_prior: bool = True) -> np.ndarray:
    """The first round's ladder: ``levels`` + 1 betas evenly from 1 to the hot end (see the module);
    ``to_prior=False`` ends it at ``beta_min`` whatever the method."""
    given = "beta_min" in config.user_keys() or "beta" not in config.needs
    hot = config.beta_min if given or not to_prior else 0.0
    return np.linspace(1.0, hot, config.levels + 1)


PRIOR_REJECTION = 0.95
"""Swap rejection of the prior (beta = 0) with its neighbour, in the last round, above which the prior is
taken for improper (its replica wanders off where the likelihood is nil) and the ladder stops at beta_min."""


def adapt_ladder(
    config: PTConfig | TTConfig,
    model,
    data: dict[str, Any],
    adaptation,
    starts: np.ndarray,
    *,
    seed: int,
    subsets_seed: int,
    say: Callable[[str], None],
) -> tuple[Schedule, float]:
    """The placed schedule from each chain's start, and the seconds it took.

    ``subsets_seed`` is the kernel factory's (a subsampled ladder's subsets are the run's own).
    For tempered transitions the schedule's betas are the trajectories' ladder; its rounds are the
    PT pilot's.
    """

    def kernel(betas, factors, parallel: bool):
        placed = config.replace(betas=[float(b) for b in betas], step_factors=[float(f) for f in factors])
        factory = KernelFactory(placed, model, data, adaptation, seed=subsets_seed)
        return factory.tempering(parallel=parallel, move=inner_move(placed))

    started = time.perf_counter()
    sequences = np.random.SeedSequence(seed).spawn(len(starts))
    given = config.levels + 1 if "levels" in config.user_keys() else None
    parallel = isinstance(config, PTConfig)
    say(f"placing the ladder: {config.schedule_rounds} rounds of parallel tempering, {len(starts)} chains")

    def place(to_prior: bool) -> Schedule:
        return adapt_schedule(lambda betas, factors: kernel(betas, factors, True), starts,
                              [np.random.default_rng(s) for s in sequences], starting_betas(config, to_prior),
                              rounds=config.schedule_rounds, n_levels=given if parallel else None,
                              inner_target=INNER_ACCEPTANCE[config.inner], say=say)  # fmt: skip

    schedule = place(to_prior=True)
    last = schedule.rounds[-1]
    if last.betas[-1] == 0 and last.rejection[-1] > PRIOR_REJECTION:
        say(f"the prior (beta = 0) refused {last.rejection[-1]:.0%} of its swaps with the next level: it "
            "looks improper (a parameter without a proper prior), so it has no evidence; placing the ladder "
            f"down to beta_min = {config.beta_min} instead (give every parameter a proper prior, or set "
            "beta_min)")  # fmt: skip
        schedule = place(to_prior=False)
        schedule.note = "the prior looked improper: the ladder stops at beta_min and no evidence is reported"
    if not parallel:
        _for_transitions(schedule, given, lambda betas, factors: kernel(betas, factors, False), seed + 1, say)
    seconds = time.perf_counter() - started
    say(f"ladder: {len(schedule.betas)} levels, barrier {schedule.barrier:.2f} ({seconds:.1f} s)")
    return schedule, seconds


def _for_transitions(schedule: Schedule, given: int | None, make_tt, seed: int, say) -> None:
    """Turn the PT pilot's ``schedule`` into tempered transitions' ladder: ``given`` levels, or the
    barrier's count (:func:`levels_for_trajectories`) corrected by a short pilot of the transitions."""
    last = schedule.rounds[-1]

    def place(levels: int) -> None:
        old, schedule.betas = schedule.betas, equalised_betas(last.betas, last.rejection, levels)
        schedule.step_factors = factors_at(old, schedule.step_factors, schedule.betas)

    place(given or levels_for_trajectories(schedule.barrier))
    schedule.replicas = None
    if given is not None:
        return
    tried = len(schedule.betas)
    run = run_chains(lambda chain: make_tt(schedule.betas, schedule.step_factors), schedule.positions,
                     TRAJECTORY_PILOT, seed=seed)  # fmt: skip
    measured = float(np.mean([s["tt_acceptance"] for s in run.summaries]))
    levels = levels_for_acceptance(tried, measured)
    say(f"tempered transitions: {tried} levels accepted {measured:.2f} of the pilot's trajectories; "
        f"{levels} levels for {TRAJECTORY_ACCEPTANCE}")  # fmt: skip
    schedule.trajectory_pilot = {"levels": tried, "acceptance": measured}
    place(levels)
