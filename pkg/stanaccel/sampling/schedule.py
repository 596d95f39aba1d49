"""The tempering ladder of ``pt``, ``spt``, ``tt`` and ``stt`` placed on the user's program before the
draws.

:mod:`stanaccel.kernels.schedule` does the work: rounds of parallel
tempering of doubling length, after each the betas re-spaced to equal swap
rejection rates and the number of levels chosen from the estimated global
barrier Lambda. Tempered transitions (``tt``, ``stt``) run the same rounds
as a pilot, with their own inner moves, and take the pilot's cumulative
barrier with the number of levels their trajectories need
(:func:`~stanaccel.kernels.schedule.levels_for_trajectories`: in the square
of the barrier), corrected by short pilots of the transitions; where even
the most levels are too few, the ladder stops short of its hot end
(:func:`~stanaccel.kernels.schedule.trajectory_span`). What this module
decides is what the settings mean:

- ``betas`` given, or ``levels`` and ``beta_min`` both (the geometric
  ladder beta_min^(m / levels), as the papers' studies give it), or
  ``schedule_rounds = 0``: that ladder, as given (no adaptation).
- ``levels`` alone: that many levels above the target, their betas placed.
  So too for ``spt`` given nothing (``levels`` defaults to 6): a subsampled
  ladder's barrier grows with its levels, since neighbouring subsets differ
  by whole observations, whose swaps are refused however close the betas,
  so the barrier cannot choose their number. Its betas are kept to whole
  subset sizes (:func:`~stanaccel.kernels.ladder.subset_betas`).
- the ladder's hot end: beta = 0 on a power ladder (the prior, so that
  ``pt`` also reports the evidence by stepping stone) unless ``beta_min``
  is given; a subsampled ladder (``spt``, ``stt``) keeps ``beta_min``, since
  a subset of no observations is not a data set every program accepts.

The first round starts from betas spaced evenly between 1 and that end
(Pigeons.jl starts so too). The rounds also adapt each level's factor on its
inner step (HMC) or scale (MH) to :data:`INNER_ACCEPTANCE`; the draws use the
placed ``betas`` and ``step_factors``.

A run with a checkpoint folder keeps its placed ladder there
(:data:`LADDER_FILE`), and a run that continues the same chains takes it
from there rather than place it again (:func:`placed_ladder`): a resumed
workflow step, and ``auto``'s pilot going on into its check and its full
run, which placed the same ladder up to four times before.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import read_checked_pickle, write_checkpoint
from stanaccel.kernels import run_chains
from stanaccel.kernels.schedule import (
    MAX_LEVELS,
    TRAJECTORY_ACCEPTANCE,
    Schedule,
    adapt_schedule,
    equalised_betas,
    factors_at,
    levels_for_acceptance,
    levels_for_trajectories,
    trajectory_span,
)
from stanaccel.sampling.build import KernelFactory
from stanaccel.sampling.config import PTConfig, SamplerConfig, TTConfig
from stanaccel.sampling.methods import inner_move
from stanaccel.sampling.program import observations_for

INNER_ACCEPTANCE = {"hmc": 0.8, "mh": 0.3}
"""The acceptance each level's inner move is adapted to while the ladder is placed: HMC's at the end of a
trajectory (NUTS's target; the warm-up's step gave 0.9 at the target and 0.3 at the hot end of a Stan
program's ladder), random-walk Metropolis's about the 0.234 of high dimensions."""

TRAJECTORY_PILOT = 64
"""Iterations per chain of the tempered-transition pilot that corrects the number of levels."""

TRAJECTORY_PILOTS = 3
"""The most pilots. One corrects a power ladder; a subsampled or shortened ladder gets up to two more,
each correcting the last if it accepted under half the target (the model leaves out, for one, the
noise of a subset ladder's whole observations)."""


GIVEN_KEYS = ("levels", "beta_min")
"""The settings whose being given, not only their value, changes the placed ladder (see the module)."""


def adapts_schedule(config: SamplerConfig) -> bool:
    """Whether ``config`` (resolved) asks for a placed ladder: a tempering method given no ladder (see the
    module docstring)."""
    if not isinstance(config, PTConfig | TTConfig) or config.betas is not None:
        return False
    return config.schedule_rounds > 0 and not set(GIVEN_KEYS) <= config.user_keys()


def starting_betas(config: PTConfig | TTConfig, to_prior: bool = True) -> np.ndarray:
    """The first round's ladder: ``levels`` + 1 betas evenly from 1 to the hot end (see the module);
    ``to_prior=False`` ends it at ``beta_min`` whatever the method."""
    given = "beta_min" in config.user_keys() or "beta" not in config.needs
    hot = config.beta_min if given or not to_prior else 0.0
    return np.linspace(1.0, hot, config.levels + 1)


IMPROPER_PRIOR = "the prior looked improper: the ladder stops at beta_min and no evidence is reported"
"""The placed schedule's ``note`` when :data:`PRIOR_REJECTION` took the prior for improper."""

PRIOR_REJECTION = 0.95
"""Swap rejection of the prior (beta = 0) with its neighbour, in the last round, above which the prior is
taken for improper (its replica wanders off where the likelihood is nil) and the ladder stops at beta_min."""


LADDER_FILE = "ladder.pkl"
"""The placed ladder in a run's checkpoint folder (with its manifest, ``ladder.pkl.json``)."""


def placed_ladder(
    config: PTConfig | TTConfig,
    model,
    data: dict[str, Any],
    adaptation,
    starts: np.ndarray,
    *,
    seed: int,
    subsets_seed: int,
    say: Callable[[str], None],
    checkpoint: str | Path | None = None,
) -> tuple[Schedule, float]:
    """:func:`adapt_ladder`'s schedule and seconds, or those it gave an earlier run of the same chains.

    The placement is seeded, so a run that continues the chains of one in
    ``checkpoint`` would place the same ladder again. It takes the one kept
    in :data:`LADDER_FILE` there instead, where the key matches: the
    settings (all but ``draws`` and ``warmup``), which of :data:`GIVEN_KEYS`
    were given, the seeds, and the warm-up's start points, metric and step
    (a CRC of each array). Its seconds are those it took when placed: they
    are charged again, as the draws a resumed run takes from its
    checkpoints are. A ladder placed here is kept there for the next run.
    """
    path = None if checkpoint is None else Path(checkpoint) / LADDER_FILE
    key = _ladder_key(config, adaptation, starts, seed, subsets_seed)
    if path is not None and path.is_file():
        try:
            saved = read_checked_pickle(path)
        except ValueError as error:
            saved = None
            say(f"{error}: the ladder is placed again")
        if isinstance(saved, dict) and saved.get("key") == key:
            schedule, seconds = saved["schedule"], saved["seconds"]
            say(f"ladder: {len(schedule.betas)} levels, barrier {schedule.barrier:.2f}, as an earlier run of "
                f"these chains placed it ({seconds:.1f} s, charged again; kept in {path})")  # fmt: skip
            return schedule, seconds
    schedule, seconds = adapt_ladder(config, model, data, adaptation, starts, seed=seed,
                                     subsets_seed=subsets_seed, say=say)  # fmt: skip
    if path is not None:
        write_checkpoint(path, {"key": key, "schedule": schedule, "seconds": seconds})
    return schedule, seconds


def _ladder_key(config: SamplerConfig, adaptation, starts: np.ndarray, seed: int, subsets_seed: int) -> dict:
    """What places a ladder, as plain values (see :func:`placed_ladder`)."""

    def crc(values) -> int | None:
        return None if values is None else zlib.crc32(np.ascontiguousarray(values, dtype=float).tobytes())

    settings = {k: v for k, v in config.as_dict().items() if k not in ("draws", "warmup")}
    return {
        "settings": repr(settings),
        "given": sorted(set(GIVEN_KEYS) & config.user_keys()),
        "seeds": [int(seed), int(subsets_seed)],
        "starts": crc(starts),
        "metric": crc(adaptation.inv_metric),
        "step_size": adaptation.step_size,
    }


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
    subsampled = "beta" not in config.needs
    n_obs = observations_for(config, model, data).check(data) if subsampled else None
    parallel = isinstance(config, PTConfig)
    given = config.levels + 1 if "levels" in config.user_keys() else None
    rounds_levels = config.levels + 1 if subsampled else given if parallel else None
    say(f"placing the ladder: {config.schedule_rounds} rounds of parallel tempering, {len(starts)} chains")

    def place(to_prior: bool) -> Schedule:
        return adapt_schedule(lambda betas, factors: kernel(betas, factors, True), starts,
                              [np.random.default_rng(s) for s in sequences], starting_betas(config, to_prior),
                              rounds=config.schedule_rounds, n_levels=rounds_levels,
                              inner_target=INNER_ACCEPTANCE[config.inner], n_obs=n_obs, say=say)  # fmt: skip

    schedule = place(to_prior=True)
    last = schedule.rounds[-1]
    if last.betas[-1] == 0 and last.rejection[-1] > PRIOR_REJECTION:
        say(f"the prior (beta = 0) refused {last.rejection[-1]:.0%} of its swaps with the next level: it "
            "looks improper (a parameter without a proper prior), so it has no evidence; placing the ladder "
            f"down to beta_min = {config.beta_min} instead (give every parameter a proper prior, or set "
            "beta_min)")  # fmt: skip
        schedule = place(to_prior=False)
        schedule.note = IMPROPER_PRIOR
    if not parallel:
        _for_transitions(schedule, given, lambda betas, factors: kernel(betas, factors, False), seed + 1, say,
                         n_obs)  # fmt: skip
    seconds = time.perf_counter() - started
    say(f"ladder: {len(schedule.betas)} levels, barrier {schedule.barrier:.2f} ({seconds:.1f} s)")
    return schedule, seconds


def _for_transitions(
    schedule: Schedule, given: int | None, make_tt, seed: int, say, n_obs: int | None
) -> None:
    """Turn the PT pilot's ``schedule`` into tempered transitions' ladder: ``given`` levels, or the
    barrier's count (:func:`levels_for_trajectories`) corrected by a short pilot of the transitions
    (``n_obs``: a subsampled ladder's observations, whose subset sizes bound the levels)."""
    last = schedule.rounds[-1]

    def place(levels: int, span: float = 1.0) -> None:
        old, schedule.betas = schedule.betas, equalised_betas(last.betas, last.rejection, levels, n_obs, span)
        schedule.step_factors = factors_at(old, schedule.step_factors, schedule.betas)

    place(given or levels_for_trajectories(schedule.barrier))
    schedule.replicas = None
    if given is not None:
        return
    span, schedule.trajectory_pilot = 1.0, []
    for pilot in range(TRAJECTORY_PILOTS):
        tried, hot = len(schedule.betas), schedule.betas[-1]
        run = run_chains(lambda chain: make_tt(schedule.betas, schedule.step_factors), schedule.positions,
                         TRAJECTORY_PILOT, seed=seed + pilot)  # fmt: skip
        measured = float(np.mean([s["tt_acceptance"] for s in run.summaries]))
        schedule.trajectory_pilot.append({"levels": tried, "acceptance": measured, "span": span})
        said = f"tempered transitions: {tried} levels accepted {measured:.3f} of the pilot's trajectories"
        if pilot > 0 and measured >= TRAJECTORY_ACCEPTANCE / 2:
            say(f"{said}: kept")
            break
        most = MAX_LEVELS if n_obs is None else min(MAX_LEVELS, n_obs - max(round(hot * n_obs), 1) + 1)
        levels = min(levels_for_acceptance(tried, measured), most)
        if levels == most:
            span *= trajectory_span(tried, measured, most)
        say(f"{said}; {levels} levels for {TRAJECTORY_ACCEPTANCE}"
            + (f" over {span:.0%} of the barrier" if span < 1 else ""))  # fmt: skip
        place(levels, span)
        if n_obs is None and span == 1:
            break  # on a power ladder the model's correction held (0.294 and 0.297 measured)
    if span < 1:
        shortened = (
            f"trajectories over the whole ladder were accepted too rarely even with the most levels ({most}"
            f"{', the distinct subsets' if most < MAX_LEVELS else ''}): the ladder stops at "
            f"beta = {schedule.betas[-1]:.3g}, {span:.0%} of the barrier down from the target (pt and spt "
            "cross all of it; beta_min or betas set the ladder)"
        )
        say(shortened)
        schedule.note = "; ".join(filter(None, [schedule.note, shortened]))
