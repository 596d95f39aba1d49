"""The pilots and their race: each candidate's pilot is the start of its full run, scored by the ESS per
second that run would give with everything charged (:data:`FORMULA`); a pilot that cannot beat the best
so far is dropped, and the pilots not chosen share a budget."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.diagnostics import worst_ess, worst_rhat
from stanaccel.diagnostics.metrics import ess_by_coordinate
from stanaccel.errors import ConfigError
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.draws import _unconstrained
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.config import make_config
from stanaccel.sampling.methods import MethodSpec
from stanaccel.sampling.program import ProgramConventionError
from stanaccel.sampling.result import SampleResult, method_label
from stanaccel.sampling.run import run_nuts, run_sampler
from stanaccel.sampling.warmup import DENSE_MAX_DIM, averaged_step, step_size_fit, warmup_covariance
from stanaccel.stan.errors import StanError
from stanaccel.stan.nuts import WarmupState
from stanaccel.stan.provenance import Provenance


@dataclass
class Pilot:
    """One candidate's pilot and what it projects for the full run."""

    method: str
    role: str
    label: str
    warmup: str = ""
    setup_seconds: float = float("nan")
    warmup_seconds: float = float("nan")
    ess_per_draw: float = float("nan")
    seconds_per_draw: float = float("nan")
    pilot_seconds: float = 0.0
    rhat: float = float("nan")
    z_max: float | None = None
    slowest: int | None = None
    """The unconstrained coordinate of the smallest ESS in the pilot (what holds the sampler back)."""
    slowest_name: str = ""
    in_funnel: bool = False
    note: str = ""
    result: SampleResult | None = None
    settings: dict[str, Any] | None = None
    checkpoint: Path | None = None
    """Where a pilot's chains are checkpointed: its full run continues them."""
    state: WarmupState | None = None
    """The NUTS pilot's adapted step sizes, metric and starts: its full run continues from them."""
    partial: SampleResult | None = None
    """The draws of a pilot dropped from the race: a reference for the agreement check if none finished."""
    variant: str = ""
    """What sets this pilot apart from another of the same method (NUTS's "dense" metric from its warm-up)."""

    @property
    def name(self) -> str:
        """The method, and its variant where it has one (``nuts (dense)``): how the messages name it."""
        return f"{self.method} ({self.variant})" if self.variant else self.method

    def full_seconds(self, chain_draws: int) -> float:
        """The seconds of a full run of ``chain_draws`` chain-draws: warm-up, set-up and draws."""
        return self.warmup_seconds + self.setup_seconds + self.seconds_per_draw * chain_draws

    def projected(self, chain_draws: int) -> float:
        """The ESS per second of a full run of ``chain_draws`` chain-draws, everything charged."""
        value = self.ess_per_draw * chain_draws / self.full_seconds(chain_draws)
        return float(value) if np.isfinite(value) else float("nan")

    def row(self, chain_draws: int, chosen: bool) -> dict[str, Any]:
        return {
            "method": self.method,
            "name": self.name,
            "sampler": self.label,
            "warmup": self.warmup,
            "warmup_s": self.warmup_seconds,
            "setup_s": self.setup_seconds,
            "pilot_ess_per_draw": self.ess_per_draw,
            "s_per_draw": self.seconds_per_draw,
            "projected_ess_per_s": self.projected(chain_draws),
            "pilot_s": self.pilot_seconds,
            "pilot_rhat": self.rhat,
            "z_vs_reference": self.z_max,
            "slowest": self.slowest_name,
            "slowest_in_funnel": self.in_funnel,
            "chosen": chosen,
            "note": self.note,
        }


@dataclass
class Race:
    """The best projection so far, and whether a candidate's seconds per draw still let it beat that.

    ``chain_draws`` is the full run's C x D; ``cap`` the largest ESS per
    chain-draw a pilot can show (ArviZ's log10 of its chain-draws).
    """

    chain_draws: int
    cap: float
    best: float = 0.0
    leader: str = ""
    leader_role: str = ""
    deadline: float = float("inf")
    """When the pilots' share of the leader's full run (:data:`PILOT_SHARE`) is spent (``perf_counter``)."""
    share: str = ""

    def ceiling(self, seconds_per_draw: float, warmup_seconds: float, cap: float) -> float:
        """The highest projected ESS/s of a candidate of these seconds per chain-draw and warm-up."""
        return cap * self.chain_draws / (warmup_seconds + seconds_per_draw * self.chain_draws)

    def lost(
        self, seconds_per_draw: float, warmup_seconds: float, after: str, positive: bool = False,
        probed: float | None = None, nuts: bool = False,
    ) -> str:  # fmt: skip
        """Why the candidate is dropped, or "" while it can still beat the best.

        ``positive``: its kernel is positive (ESS per draw at most 1), held to
        :data:`POSITIVE_CAP`; ``probed``: the ESS per draw its probe showed,
        held to :data:`PROBE_MARGIN` times that.
        """
        cap = min(self.cap, constants.POSITIVE_CAP) if positive or nuts else self.cap
        most = "the most a pilot shows"
        if positive or nuts:
            most = "a positive kernel's ESS/draw, at most 1" if positive else "NUTS's tail ESS/draw, about 1"
        margin = constants.PROBE_MARGIN
        if probed is not None and margin * probed < cap:
            cap, most = margin * probed, f"{margin:g} x its probe's {probed:.2g}"
        ceiling = self.ceiling(seconds_per_draw, warmup_seconds, cap)
        if not self.best or ceiling >= self.bar():
            return ""
        bar = f"{self.leader}'s {self.best:.3g}"
        if self.bar() > self.best:
            bar = (
                f"{constants.NUTS_MARGIN:g} x {bar} (the margin by which another must beat NUTS to be chosen)"
            )
        return (
            f"dropped {after}: at {seconds_per_draw:.3g} s/draw it projects at most {ceiling:.3g} ESS/s "
            f"(ESS/draw {cap:.2g}, {most}), below {bar}"
        )

    def bar(self) -> float:
        """The projection a candidate must reach to be chosen: the best's, or :data:`NUTS_MARGIN` x NUTS's."""
        return self.best * (constants.NUTS_MARGIN if self.leader_role == "own-warmup" else 1.0)

    def enter(self, pilot: Pilot) -> None:
        """Make ``pilot``'s projection the best if it is higher; the pilots' budget a share of its run."""
        value = pilot.projected(self.chain_draws)
        if pilot.result is not None and not pilot.note and np.isfinite(value) and value > self.best:
            self.best, self.leader, self.leader_role = value, pilot.name, pilot.role
            run = pilot.full_seconds(self.chain_draws)
            budget = max(constants.PILOT_SHARE * run, constants.PILOT_FLOOR)
            self.deadline = time.perf_counter() + budget
            self.share = (f"{budget:.3g} s: {constants.PILOT_SHARE:.0%} of {pilot.name}'s projected "
                          f"{run:.3g} s, at least {constants.PILOT_FLOOR:g} s")  # fmt: skip

    def spent(self) -> str:
        """Why no pilot may go on (the pilots' share of the leader's run is spent), or ""."""
        return (
            f"stopped: the pilots' share ({self.share}) was spent"
            if time.perf_counter() > self.deadline
            else ""
        )


class _Stop:
    """A kernel pilot's ``stop``: once every chain has ``draws``, or its candidate lost the race.

    A chain that has its draws goes on until the slowest has them too (its
    checkpoint keeps them all; the full run continues from there), so chains
    started late are not cut short. Each chain is timed from its first draw.
    """

    def __init__(self, race: Race, draws: int, chains: int, warmup_seconds: float, positive: bool):
        self.race, self.draws, self.chains, self.warmup_seconds = race, draws, chains, warmup_seconds
        self.positive = positive
        self.first: dict[int, tuple[float, int]] = {}
        self.last: dict[int, tuple[float, int]] = {}
        self.lost = ""
        self.asked = False  # whether it stopped the chains: an interrupted run it did not stop was stopped

    @property
    def seconds_per_draw(self) -> float:
        """The slowest chain's seconds per draw, per chain (the chains in parallel): t of the score."""
        last = dict(self.last)  # copies: the chains' threads add to both while this reads them
        rates = [
            (last[c][0] - began) / (last[c][1] - before)
            for c, (began, before) in list(self.first.items())
            if c in last and last[c][1] > before
        ]
        return max(rates) / self.chains if rates else float("nan")

    def __call__(self, chain: int, done: int) -> bool:
        self.asked = self._ends(chain, done) or self.asked
        return self.asked

    def _ends(self, chain: int, done: int) -> bool:
        now = time.perf_counter()
        began, before = self.first.setdefault(chain, (now, done))
        self.last[chain] = (now, done)
        if len(self.last) == self.chains and min(d for _, d in list(self.last.values())) >= self.draws:
            return True
        self.lost = self.race.spent()
        if self.lost or done - before < constants.RACE_DRAWS or now - began < constants.RACE_SECONDS:
            return bool(self.lost)
        self.lost = self.race.lost(
            self.seconds_per_draw, self.warmup_seconds, f"after {done} draws", self.positive
        )
        return bool(self.lost)


FORMULA = (
    "projected ESS/s = e x C x D / (W + S + t x C x D): e, t the pilot's ESS (the worst over the "
    "parameters of min(bulk, tail)) and sampling seconds per chain-draw, C x D the full run's chains x "
    "draws, W the shared warm-up, S the candidate's own set-up (tuning, approximation; NUTS after a cheap "
    "warm-up: its step-size iterations). A pilot is dropped once its seconds per draw cap this below the "
    "best so far even at the largest e a pilot shows (log10 of its chain-draws; "
    f"{constants.POSITIVE_CAP:g} for a positive kernel), or, behind a leader, at "
    f"{constants.PROBE_MARGIN:g} x the e of its probe (its first draws); the pilots not chosen take at most "
    f"{constants.PILOT_SHARE:.0%} of the leader's projected run"
)


def _nuts_pilot(run: AutoRun, spec: MethodSpec, race: Race, seed: int) -> Pilot:
    """Stan's NUTS from the shared warm-up, its pilot the start of its full run (no second warm-up).

    After NUTS's own warm-up it draws at once with the adapted step sizes and
    metrics. After a cheap one it moves with the fit's covariance as a dense
    metric (up to :data:`~stanaccel.sampling.warmup.DENSE_MAX_DIM`
    parameters), first adapting its step size alone from the warm-up's
    starts: a probe of :data:`NUTS_PILOT_PROBE` iterations, then
    :data:`NUTS_PILOT_STEP`, either of which may drop a NUTS that cannot win
    for their cost; those iterations are its set-up S.
    The draws are checkpointed in chunks of the pilot's length in
    ``folder`` / "nuts", which the full run continues.
    """
    model, adaptation, auto, say = run.model, run.adaptation, run.auto, run.say
    start = time.perf_counter()
    pilot = Pilot(spec.name, spec.auto, spec.label, warmup=adaptation.warmup, checkpoint=Path(run.folder))
    pilot.warmup_seconds, pilot.setup_seconds = run.warm_seconds, 0.0
    state = adaptation.warmup_state
    dense = adaptation.dense if adaptation.dense is not None and model.dim <= DENSE_MAX_DIM else None
    if dense is not None or state is None or not state.has_step_size or len(state.step_size) != auto.chains:
        metric = f"the {adaptation.warmup} fit's dense metric" if dense is not None else "its metric"
        say(f"auto: pilot of {spec.label} from the shared warm-up's starts and {metric}, {auto.chains} "
            f"chains x ({constants.NUTS_PILOT_STEP} step-size iterations + {auto.pilot_draws})")  # fmt: skip
        pilot.label = (
            f"{spec.label} (dense metric from the {adaptation.warmup} fit)"
            if dense is not None
            else spec.label
        )
        state = _nuts_step(run, pilot, race, seed, dense)
        if state is None:
            pilot.pilot_seconds = time.perf_counter() - start
            return pilot
    else:
        say(f"auto: pilot of {spec.label}, {auto.chains} chains x {auto.pilot_draws} draws continuing the "
            "shared warm-up (the first draws of its full run)")  # fmt: skip
    return _nuts_draws(run, spec, pilot, state, seed, start)


def _adapted_dense_pilot(run: AutoRun, spec: MethodSpec, race: Race, seed: int) -> Pilot:
    """Stan's NUTS with a dense metric estimated from NUTS's own warm-up draws, beside the diagonal one.

    Where the cheap warm-ups were refused, NUTS's warm-up (diagonal metric)
    is the one shared; its draws after adaptation settled (the last half,
    pooled over the chains) also give the covariance Stan's ``metric=dense``
    would adapt (:func:`~stanaccel.sampling.warmup.warmup_covariance`), for
    the cost of a step-size adaptation alone rather than a second warm-up.
    It is the third configuration of NUTS ``auto`` chooses among (with the
    diagonal and the Laplace or Pathfinder fit's dense metric): on
    correlated posteriors Stan's dense metric made 2-67x the diagonal's ESS
    per second on posteriordb, and on a funnel it does worse, so the
    pilot decides. Its draws are checkpointed in ``folder`` / "dense".
    """
    adaptation, auto, say = run.adaptation, run.auto, run.say
    start = time.perf_counter()
    label = f"{spec.label} (dense metric from its warm-up)"
    folder = Path(run.folder) / "dense"
    pilot = Pilot(spec.name, spec.auto, label, warmup=adaptation.warmup, checkpoint=folder, variant="dense")
    pilot.warmup_seconds, pilot.setup_seconds = run.warm_seconds, 0.0
    if race.spent():
        pilot.note = f"not piloted: {race.spent()[9:]}"
        return pilot
    dense = warmup_covariance(adaptation.draws)
    say(f"auto: pilot of {label}: the covariance of the warm-up's last {len(adaptation.draws)} draws, "
        f"{auto.chains} chains x ({constants.NUTS_PILOT_STEP} step-size iterations + "
        f"{auto.pilot_draws})")  # fmt: skip
    state = _nuts_step(run, pilot, race, seed, dense)
    if state is None:
        pilot.pilot_seconds = time.perf_counter() - start
        return pilot
    return _nuts_draws(run, spec, pilot, state, seed, start)


def _nuts_draws(run: AutoRun, spec: MethodSpec, pilot: Pilot, state: WarmupState, seed: int, start: float):
    """A NUTS pilot's draws from its warm-up ``state`` (checkpointed: its full run continues them)."""
    auto = run.auto
    pilot.state = replace(state, seconds=run.warm_seconds + pilot.setup_seconds)
    config = make_config(spec.name, {"chains": auto.chains, "draws": auto.pilot_draws})
    result = run_nuts(config, run.model, run.program.name, seed, run.seeds, warmup_from=pilot.state,
                      checkpoint=pilot.checkpoint, checkpoint_draws=auto.pilot_draws)  # fmt: skip
    if result.run.interrupted:
        raise KeyboardInterrupt
    sampling = float(np.max(result.run.chain_seconds))
    return _measured(pilot, result, sampling, time.perf_counter() - start)


def _nuts_step(run: AutoRun, pilot: Pilot, race: Race, seed: int, dense=None) -> WarmupState | None:
    """NUTS's step sizes adapted alone from a cheap warm-up, as a warm-up state; None if NUTS lost the race.

    The metric is the warm-up's (diagonal), or ``dense``: the full covariance of a cheap warm-up's
    Gaussian, or one estimated from NUTS's warm-up draws.

    Its seconds are the pilot's set-up; the race may drop NUTS after the
    probe's iterations or the step-size ones, at its seconds per draw (the
    leapfrog steps of their last half, once the step size has settled).
    """
    model, adaptation, auto = run.model, run.adaptation, run.auto
    start = time.perf_counter()
    metric = np.asarray(adaptation.inv_metric if dense is None else dense)
    kind = "diag" if metric.ndim == 1 else "dense"
    initial = adaptation.step_size or 1.0
    for iterations in (constants.NUTS_PILOT_PROBE, constants.NUTS_PILOT_STEP):
        starts = adaptation.starts[np.arange(auto.chains) % len(adaptation.starts)]
        fit = step_size_fit(model, starts, metric, iterations, seed, False, step_size=initial)
        if fit.interrupted:
            raise KeyboardInterrupt
        chain = float(np.max(fit.chain_seconds))
        leapfrogs = np.asarray(fit.warmup_sample_stats["n_steps"], dtype=float)
        per_draw = chain / auto.chains / leapfrogs.sum(axis=1).max() * leapfrogs[:, iterations // 2 :].mean()
        pilot.setup_seconds = time.perf_counter() - start
        if iterations == constants.NUTS_PILOT_PROBE and chain < constants.NUTS_PROBE_SECONDS:
            continue  # too short to time: a pause is most of it
        pilot.note = race.lost(per_draw, pilot.warmup_seconds + pilot.setup_seconds,
                               f"after {iterations} step-size iterations", nuts=True)  # fmt: skip
        if pilot.note:
            pilot.seconds_per_draw = per_draw
            run.say(f"auto: {pilot.label} {pilot.note}")
            return None
    steps = np.array([averaged_step(a, initial) for a in fit.warmup_sample_stats["acceptance_rate"]])
    metrics = np.repeat(metric[None], auto.chains, axis=0)
    return WarmupState(steps, metrics, kind, fit.last_unconstrained(), warmup=adaptation.warmup,
                       provenance=Provenance.of(model))  # fmt: skip


def _measured(pilot: Pilot, result: SampleResult, sampling: float, total: float) -> Pilot:
    draws = _unconstrained(result)
    pilot.result = result
    ess = ess_by_coordinate(draws)
    chain_draws = draws.shape[0] * draws.shape[1]
    if not np.isnan(ess).all():
        pilot.slowest = int(np.nanargmin(ess))
    pilot.ess_per_draw = float(np.min(ess[~np.isnan(ess)], initial=np.inf)) / chain_draws  # as _ess_per_draw
    pilot.seconds_per_draw = sampling / chain_draws
    pilot.pilot_seconds = total
    pilot.rhat = worst_rhat(draws)
    return pilot


def _pilot(run: AutoRun, spec: MethodSpec, settings: dict[str, Any], race: Race) -> Pilot:
    """A candidate's pilot after the shared warm-up: the start of its full run, unless it loses the race.

    Its own set-up (tuning, approximation) is measured; its chains are
    checkpointed in ``folder`` / its name for the full run to continue.
    Once the race has a leader, the pilot first draws a probe
    (:data:`PROBE_SHARE`): a candidate whose probe's ESS, with
    :data:`PROBE_MARGIN` to spare, cannot beat the leader is dropped there.
    """
    model, adaptation, auto, say = run.model, run.adaptation, run.auto, run.say
    warm_seconds = run.warm_seconds
    values = {**settings, "chains": auto.chains, "draws": auto.draws}
    config = make_config(spec.name, values)
    pilot = Pilot(spec.name, spec.auto, method_label(config), warmup=adaptation.warmup, settings=settings,
                  checkpoint=Path(run.folder) / spec.name)  # fmt: skip
    pilot.warmup_seconds = warm_seconds
    say(
        f"auto: pilot of {pilot.label}, {auto.chains} chains x {auto.pilot_draws} draws after the shared "
        "warm-up (the first draws of its full run)"
    )
    start = time.perf_counter()
    probe = max(auto.pilot_draws // constants.PROBE_SHARE, constants.PROBE_DRAWS)
    stages = [probe, auto.pilot_draws] if race.best and probe < auto.pilot_draws else [auto.pilot_draws]
    for draws in stages:
        stop = _Stop(race, draws, auto.chains, warm_seconds, spec.positive)
        try:
            result = run_sampler(config, model, run.data, adaptation, seed=run.seed, seeds=run.seeds,
                                 charged={}, describe=False, checkpoint=pilot.checkpoint,
                                 stop=stop)  # fmt: skip
        except (ConfigError, ProgramConventionError, StanError, ValueError) as error:
            pilot.note = f"failed: {str(error).splitlines()[0]}"
            pilot.pilot_seconds = time.perf_counter() - start
            say(f"auto: the pilot of {pilot.label} failed ({pilot.note}); it is not a candidate")
            return pilot
        if result.interrupted and not stop.asked:  # Ctrl-C or a stop signal, not the race: the run stops
            raise KeyboardInterrupt(f"stopped during the pilot of {pilot.label}")
        if draws == stages[0]:
            pilot.setup_seconds = sum(result.charged_seconds.values())
            pilot.label = method_label(result.config)
            config = make_config(spec.name, {**values, **_tuned_step(spec, result.config)})
        if not stop.lost and draws < auto.pilot_draws:
            probed = _ess_per_draw(_unconstrained(result))
            stop.lost = race.lost(stop.seconds_per_draw, warm_seconds, f"after a probe of {result.num_draws} "
                                  "draws", spec.positive, probed)  # fmt: skip
        if stop.lost:
            pilot.note, pilot.seconds_per_draw, pilot.partial = stop.lost, stop.seconds_per_draw, result
            pilot.pilot_seconds = time.perf_counter() - start
            say(f"auto: {pilot.label} {pilot.note}")
            return pilot
    chain = float(np.max(result.run.chain_seconds))  # a chain resumed past its pilot draws calls no stop
    _measured(pilot, result, chain, time.perf_counter() - start)
    if np.isfinite(stop.seconds_per_draw):
        pilot.seconds_per_draw = stop.seconds_per_draw
    return pilot


def _ess_per_draw(draws: np.ndarray) -> float:
    """The headline ESS per chain-draw of unconstrained ``draws`` (chains, draws, dim).

    The worst over the coordinates of min(bulk, tail) ESS
    (:func:`~stanaccel.diagnostics.worst_ess`); both are rank-based, so a
    parameter's is its unconstrained coordinate's; no summary of every
    quantity, which costs more.
    """
    return worst_ess(draws) / (draws.shape[0] * draws.shape[1])


def _tuned_step(spec: MethodSpec, tuned) -> dict[str, Any]:
    """The step a run of config ``tuned`` tuned, as a setting: a run that continues it keeps it."""
    step = spec.tuned_step(tuned)
    if step is None or getattr(tuned, step.key) is None:
        return {}
    return {step.key: getattr(tuned, step.key)}
