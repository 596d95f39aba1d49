"""``method = "auto"``: short pilots of the exact candidates, each scored by the ESS per second its full
run would give with everything charged; the best runs in full, continuing its pilot.

"auto" is not a method of the table: it chooses one. The candidates and
their roles come from the table (:attr:`~stanaccel.sampling.methods.MethodSpec.auto`):

- every candidate shares one warm-up (Laplace; Stan's Pathfinder if
  Laplace's diagnostics fail; NUTS's own warm-up if both do:
  :mod:`~stanaccel.sampling.warmup`), which the chosen one's full run reuses:
  no candidate warms up twice;
- "approximation" and "warm": kernels after that warm-up; "approximation"
  over the automatic approximation of the program: control variates about
  the mode (kind "control-variate", m = :func:`control_variate_size`) where
  the observations are declared (with or without ``beta``), else the
  Gaussian at the mode (kind "laplace");
- "own-warmup" (Stan's NUTS): after NUTS's own warm-up it draws at once
  with the adapted step sizes and metrics; after a cheap warm-up it first
  adapts its step size alone (:data:`NUTS_PILOT_STEP` iterations, after a
  probe of :data:`NUTS_PILOT_PROBE`) from the cheap warm-up's metric and
  starts. It is piloted first (the baseline the others must beat, whose
  projected run sets the pilots' budget) after NUTS's own warm-up, and
  where a whole Stan NUTS run is projected under :data:`NUTS_FIRST_SECONDS`
  (a cheap posterior, where the other pilots' fixed costs matter); else
  last, so that the race can drop it for its cost;
- "modes": tempering, piloted only when the other pilots' chains disagree
  about where the posterior's mass is (:func:`~stanaccel.diagnostics.modes.mode_gap`
  above :data:`MODE_GAP` within-chain sds and :data:`MODE_Z` standard
  errors, among chains that mixed where they are); then the choice is
  among these.

A pilot is the start of its candidate's full run: the full run's chains,
seeds and settings, stopped after ``pilot_draws`` draws with its chains
checkpointed, so that the chosen one's full run continues them (the same
kernel from the same starts: its draws are those of one run never stopped;
NUTS's in checkpointed chunks of the pilot's length). Per chain-draw a
pilot gives an ESS (the worst over the parameters of min(bulk, tail) ESS
over the pilot's chain-draws) and seconds (its slowest chain's seconds per
draw from its first draw on, over the chains: the time of a run without the
fixed cost of starting one); for a full run of C chains x D draws the score
is

    projected ESS/s = e x C x D / (W + S + t x C x D)

with e the pilot's ESS per chain-draw, t its sampling seconds per chain-draw,
W the shared warm-up's measured seconds, and S the candidate's own set-up
measured in its pilot (step tuning, the approximation's mode and Taylor
coefficients, NUTS's step-size iterations).

The pilots race (:class:`Race`): ArviZ caps an ESS at n log10(n) for n
draws, so no pilot of n chain-draws shows an e above log10(n); a positive
kernel's (:attr:`~stanaccel.sampling.methods.MethodSpec.positive`) is at
most 1 (:data:`POSITIVE_CAP` with the estimate's noise). A pilot whose
seconds per draw, after :data:`RACE_DRAWS` draws and :data:`RACE_SECONDS`
of each chain (NUTS: after its step-size iterations), cap its score below
the best projection so far even at that e is stopped and its candidate
dropped, the table saying so. Once a pilot leads, the next kernel pilot
first draws a probe (:data:`PROBE_SHARE`), whose ESS per draw, times
:data:`PROBE_MARGIN`, caps its e: a candidate as fast per draw as the
leader but mixing far worse (a Gaussian reference on a skewed posterior)
is dropped there. And the pilots have a budget: once a leader is known,
the others may take at most :data:`PILOT_SHARE` of its projected full run
(at least :data:`PILOT_FLOOR` seconds); when that is spent the running
pilot stops and no other starts but NUTS's, so that ``auto`` costs at most
that share more than the method it chooses.

A kernel chosen over NUTS is checked once in its full run: at
:data:`CHECK_SHARE` of its draws, its ESS per draw so far replaces its
pilot's, and where another eligible candidate would then be chosen, or its
chains disagree (R-hat above :data:`CHECK_RHAT`), that one (the best of the
others) runs instead, continuing its own pilot, the abandoned draws charged.

The pilots themselves are not in the score (they are spent whichever method
is chosen) but are charged to the result ("auto pilots"), less the chosen
one's draws, which its full run keeps. A pilot whose posterior means differ
from the reference pilot's (the NUTS pilot's; if NUTS was dropped, that of
the full-density candidate of highest ESS; if those were dropped too, the
draws of the one that drew most) by more than a Bonferroni z limit
(:data:`AGREEMENT_P`) is not chosen.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.diagnostics import reference_z_scores, worst_ess, worst_rhat
from stanaccel.diagnostics.funnel import Funnel, find_funnel
from stanaccel.diagnostics.metrics import ess_by_coordinate, split_rhat
from stanaccel.diagnostics.modes import mode_gap, visited_modes_report, within_chain_sd
from stanaccel.errors import ConfigError
from stanaccel.executors import SerialExecutor
from stanaccel.observations import Observations
from stanaccel.sampling.config import (
    AUTO,
    DEFAULT_NUTS_WARMUP,
    LARGEST,
    NUTS_WARMUP,
    _check,
    keys,
    make_config,
    setting,
)
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.program import ProgramConventionError, check_program
from stanaccel.sampling.result import SampleResult, method_label
from stanaccel.sampling.run import SEEDS, run_nuts, run_sampler
from stanaccel.sampling.warmup import (
    BORROWED,
    DENSE_MAX_DIM,
    MODE_STARTS,
    averaged_step,
    cheap_warm_up,
    checkpoint_part,
    mirrored_starts,
    modes_apart,
    nuts_warm_up,
    step_size_fit,
)
from stanaccel.seeds import spawn_seed, spawn_seeds
from stanaccel.stan.errors import StanError
from stanaccel.stan.nuts import NutsFit, WarmupState
from stanaccel.stan.optimize import modes_from_starts
from stanaccel.stan.provenance import Provenance

NUTS_PILOT_STEP = 30
"""Iterations of the NUTS pilot adapting only its step size, from the shared warm-up's metric and starts
(and its step size, where it adapted one): the first phase of NUTS's own warm-up, shortened."""

NUTS_PILOT_PROBE = 5
"""Iterations of a first, shorter step-size adaptation, whose seconds alone may drop NUTS from the race."""

POSITIVE_CAP = 1.5
"""The largest ESS per draw the race allows a pilot of a positive kernel (:attr:`MethodSpec.positive
<stanaccel.sampling.methods.MethodSpec.positive>`): 1, and room for the estimate's noise. NUTS is held
to it too: its bulk ESS per draw can pass 1 (it is antithetic on near-Gaussian targets), but its tail ESS
per draw, and so the min(bulk, tail) of the score, stays about 1 or below (at most 0.83 in posteriordb's
pilots)."""

PROBE_SHARE = 4
"""Once a leader is in the race, a kernel pilot first draws ``pilot_draws // PROBE_SHARE`` per chain (a
probe, at least :data:`PROBE_DRAWS`): their ESS can drop it before it draws the rest."""

PROBE_DRAWS = 20

PROBE_MARGIN = 2.0
"""A probe's ESS per draw, times this, is the most the race lets it claim: an ESS of 4 x 25 draws is within
a factor of about 2 of the full pilot's."""

RACE_DRAWS = 3
RACE_SECONDS = 0.1
"""A kernel pilot's chain is timed over at least :data:`RACE_DRAWS` draws and this many seconds before its
seconds per draw may drop its candidate: cheap chains run in bursts as they share the interpreter."""

NUTS_PROBE_SECONDS = 0.1
"""NUTS's probe drops it only when it took this long: on a cheap posterior its iterations take a
millisecond, which a loaded machine's pause can multiply. (NUTS races last only where a whole NUTS run is
projected over :data:`NUTS_FIRST_SECONDS`: there a probe takes tens of milliseconds or more.) Its
step-size iterations may drop it in any case."""

PILOT_ORDER = ("approximation", "warm", "own-warmup")
"""The roles in the order their candidates are piloted: the cheap ones first, so that the race has a best
projection to hold the dear ones to."""

AGREEMENT_P = 1e-3
"""A pilot disagrees with the NUTS pilot when a posterior mean differs by more than the z of this
two-sided probability, Bonferroni-corrected over the parameters and pilots."""

MODE_GAP = 3.0
"""The pilots disagree about the modes when two pilot chains' means of a coordinate lie more than this
many within-chain sds apart (and :data:`MODE_Z` standard errors): chains that mix in one mode differ by
about sd / sqrt(ESS per chain)."""

MODE_Z = 6.0
"""... and more than this many standard errors of their difference, each chain's sd / sqrt(its ESS):
chains that move slowly through one mode (a funnel's neck and mouth) differ by many sds but few errors."""

MODE_ESS = 10.0
"""A chain whose worst coordinate has a bulk ESS below this has not mixed even locally: it says nothing
about the modes, and the modes check leaves it out."""

PILOT_SHARE = 0.10
"""The pilots of the candidates not chosen may take at most this share of the leader's projected full
run (its warm-up, set-up and draws), or :data:`PILOT_FLOOR` if more: once spent, the pilot running stops
and no other starts, but NUTS's (the baseline, whose pilot its full run keeps)."""

PILOT_FLOOR = 0.25
"""Seconds the pilots may always take: about one cheap pilot, which on a posterior of a few seconds can
still find a sampler many times faster than NUTS."""

QUICK_NUTS_SECONDS = QUICK_NUTS_DEFAULT = 2.0
"""Below this projected length of a whole Stan NUTS run (:func:`_quick_nuts`), NUTS runs at once."""

NUTS_FIRST_SECONDS = NUTS_FIRST_DEFAULT = 30.0
"""Below this projected length of a whole Stan NUTS run, NUTS is piloted first after a cheap warm-up:
its pilot then costs little, and its projection caps the others' pilots at :data:`PILOT_SHARE` of its
run. The projection assumes :data:`QUICK_LEAPFROGS` per iteration, which misses by 6x either way (on
posteriordb gp_regr takes about 5, arK 33), so only the pilot tells how long NUTS's run is."""

QUICK_DENSE_MAX_DIM = 100
"""Up to this many parameters Stan's NUTS run at once (:func:`_nuts_at_once`) adapts a dense metric
(Stan's ``metric=dense``), beyond it the diagonal. On posteriordb's cheap posteriors the dense metric
made 1.8-67x the diagonal's ESS per second (kidiq_interaction 15x, diamonds 67x: correlated regression
coefficients), and nowhere less; its dim^2 per leapfrog step is nothing at a few dozen parameters, and
Stan's windowed adaptation estimates a covariance of up to about a hundred from its last 500 warm-up
draws (beyond that its regularisation toward the identity dominates)."""

QUICK_LEAPFROGS = 32
"""Gradients per NUTS iteration in that projection: a tree depth of 5 (arK of posteriordb: 33 per
iteration); a deeper tree only makes NUTS dearer, and the pilots more worth their cost."""

NUTS_MARGIN = 1.5
"""Another candidate is chosen over NUTS only if it projects this many times NUTS's ESS/s: a pilot of
4 x 100 draws estimates ESS per draw to within about this factor, and NUTS is the robust choice (on
posteriordb a pCN that projected 1.37x NUTS made half its ESS in full)."""

CHECK_SHARE = 0.25
"""A kernel chosen over NUTS first runs to this share of its draws (at least twice its pilot's), then its
ESS per draw so far is checked against its pilot's: chains that stick after the pilot (on posteriordb a
DC whose pilot showed 0.11 ESS per draw made 0.006 in full) would lose to a candidate not chosen. The
choice is then made again with the ESS measured, and the new choice continues its own pilot."""

CHECK_RHAT = 1.05
"""... and where the worst R-hat of those draws is above this, its chains disagree (they have not mixed,
or drift: on posteriordb's one_comp_mm_elim_abs a DC of R-hat 1.08 at the check made an ESS of 8 in
full), so the choice is made again without it."""

MODES_CHECK_MAX_DIM = 1000
"""Up to this many parameters Stan's NUTS run at once has the Laplace warm-up's modes check
(:func:`_check_modes`): its L-BFGS runs each compute a dim x dim Hessian (2 dim gradients)."""

WARMUPS_TRIED = ("laplace", "pathfinder")
"""The cheap warm-ups tried in turn for the shared warm-up; NUTS's warm-up if both fail their checks."""
HOPELESS_K = 10.0
"""A Laplace fit refused with its Pareto k at least this is far from the posterior: Pathfinder, whose
Gaussian is fitted along the same L-BFGS path, is not tried after it, and the approximation candidates
over the Laplace Gaussian are not piloted (their proposals would be refused almost always). See
:func:`_shared_warm_up` for the evidence."""


def is_auto(method: str) -> bool:
    """Whether ``method`` asks ``sample`` to choose the method."""
    return method == AUTO


@dataclass(frozen=True)
class AutoSettings:
    """What ``method = "auto"`` takes: the full run's size, the pilots' length, and the observations."""

    chains: int = setting(4, doc="chains of the full run", kind="int", low=1)
    draws: int = setting(1000, doc="draws per chain of the full run", kind="int", low=1)
    pilot_draws: int = setting(
        100, doc="draws per chain of each pilot (the full run's chains; the first draws of the chosen run; "
        "at most the run's draws)", kind="int", low=20, high=LARGEST,
    )  # fmt: skip
    observations: Observations | None = setting(
        doc="which data are per observation: dc is then piloted over control variates", kind="observations"
    )


AUTO_KEYS = tuple(f.name for f in fields(AutoSettings))
"""The settings ``method = "auto"`` takes."""


def auto_settings(
    settings: dict[str, Any] | None, sources: dict[str, str] | str = "settings"
) -> AutoSettings:
    """Check the settings of ``method = "auto"``; a setting that only some methods take is refused.

    Raises
    ------
    ConfigError
        A setting ``auto`` does not take, naming the methods that do and what to do instead.
    """
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings must be a dict of setting name -> value, not a {type(settings).__name__}")
    known = {f.name: f for f in fields(AutoSettings)}
    values = {}
    for key, value in (settings or {}).items():
        if value is None or key == "method":
            continue
        where = sources if isinstance(sources, str) else sources.get(key, "settings")
        if key not in known:
            owners = [name for name in METHODS if key in keys(name)]
            takes = f"it takes only {', '.join(known)}"
            if key == "warmup":
                raise ConfigError(
                    f"{where}: warmup = {value!r}: method 'auto' runs its own warm-ups (a cheap one shared "
                    f"by the candidates that take it, a short NUTS one for the NUTS pilot); {takes}. "
                    "To choose the warm-up, choose the method (--method hmc --set warmup=pathfinder)"
                )
            if not owners:
                raise ConfigError(f"{where}: unknown setting {key!r} for method 'auto'; {takes}")
            raise ConfigError(
                f"{where}: setting {key!r} is a setting of {', '.join(owners)}, not of method 'auto', which "
                f"chooses the method itself and gives each candidate its own settings; {takes}. To set "
                f"{key}, choose the method (--method {owners[0]} --set {key}=...)"
            )
        values[key] = _check(key, value, known[key].metadata, f"{where}: ")
    return AutoSettings(**values)


def control_variate_size(n: int) -> int:
    """The subset size m of the control-variate approximation ``auto`` pilots: N/20, at most 100.

    Taylor control variates about the mode leave log pi - log pi* an sd that
    falls with N (0.012 at m = 500 on the 10-predictor logistic regression at
    N = 10^4, so about 0.03 at m = 100): a larger m only makes each
    evaluation dearer (at m = 500 the DC run took 25% longer for the same ESS).
    """
    return max(1, min(n // 20, 100))


def automatic_approximation(auto: AutoSettings, program, data: dict[str, Any]) -> dict[str, Any]:
    """The approximation settings of an "approximation" candidate: control variates, else Laplace."""
    if auto.observations is not None:
        n = auto.observations.check(data)
        if n > 1:
            m = min(control_variate_size(n), n - 1)
            return {"approx": {"kind": "control-variate", "m": m}, "observations": auto.observations}
    return {"approx": {"kind": "laplace"}}


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

    def full_seconds(self, chain_draws: int) -> float:
        """The seconds of a full run of ``chain_draws`` chain-draws: warm-up, set-up and draws."""
        return self.warmup_seconds + self.setup_seconds + self.seconds_per_draw * chain_draws

    def projected(self, chain_draws: int) -> float:
        """The ESS per second of a full run of ``chain_draws`` chain-draws, everything charged."""
        value = self.ess_per_draw * chain_draws / self.full_seconds(chain_draws)
        return float(value) if np.isfinite(value) else float("nan")

    def row(self, chain_draws: int, chosen: str) -> dict[str, Any]:
        return {
            "method": self.method,
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
            "chosen": self.method == chosen,
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
        cap = min(self.cap, POSITIVE_CAP) if positive or nuts else self.cap
        most = "the most a pilot shows"
        if positive or nuts:
            most = "a positive kernel's ESS/draw, at most 1" if positive else "NUTS's tail ESS/draw, about 1"
        if probed is not None and PROBE_MARGIN * probed < cap:
            cap, most = PROBE_MARGIN * probed, f"{PROBE_MARGIN:g} x its probe's {probed:.2g}"
        ceiling = self.ceiling(seconds_per_draw, warmup_seconds, cap)
        if not self.best or ceiling >= self.bar():
            return ""
        bar = f"{self.leader}'s {self.best:.3g}"
        if self.bar() > self.best:
            bar = f"{NUTS_MARGIN:g} x {bar} (the margin by which another must beat NUTS to be chosen)"
        return (
            f"dropped {after}: at {seconds_per_draw:.3g} s/draw it projects at most {ceiling:.3g} ESS/s "
            f"(ESS/draw {cap:.2g}, {most}), below {bar}"
        )

    def bar(self) -> float:
        """The projection a candidate must reach to be chosen: the best's, or :data:`NUTS_MARGIN` x NUTS's."""
        return self.best * (NUTS_MARGIN if self.leader_role == "own-warmup" else 1.0)

    def enter(self, pilot: Pilot) -> None:
        """Make ``pilot``'s projection the best if it is higher; the pilots' budget a share of its run."""
        value = pilot.projected(self.chain_draws)
        if pilot.result is not None and not pilot.note and np.isfinite(value) and value > self.best:
            self.best, self.leader, self.leader_role = value, pilot.method, pilot.role
            run = pilot.full_seconds(self.chain_draws)
            budget = max(PILOT_SHARE * run, PILOT_FLOOR)
            self.deadline = time.perf_counter() + budget
            self.share = (f"{budget:.3g} s: {PILOT_SHARE:.0%} of {pilot.method}'s projected {run:.3g} s, at "
                          f"least {PILOT_FLOOR:g} s")  # fmt: skip

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
        if self.lost or done - before < RACE_DRAWS or now - began < RACE_SECONDS:
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
    f"best so far even at the largest e a pilot shows (log10 of its chain-draws; {POSITIVE_CAP:g} for a "
    f"positive kernel), or, behind a leader, at {PROBE_MARGIN:g} x the e of its probe (its first draws); "
    f"the pilots not chosen take at most {PILOT_SHARE:.0%} of the leader's projected run"
)


def sample_auto(
    program, model, data: dict[str, Any], auto: AutoSettings, *, seed: int, progress: bool, say,
    checkpoint=None, executor=None,
) -> SampleResult:  # fmt: skip
    """Pilot the candidates, choose the one of highest projected ESS per second, run it in full.

    ``program`` is the user's program (a :class:`~stanaccel.sampling.program.Program`),
    ``model`` its compiled instance on ``data``. The result is the chosen
    method's, charged the shared warm-up and the pilots ("auto pilots"); its
    ``reports["auto"]`` holds the pilot table and the reason for the choice.
    A chosen kernel method's run continues its pilot's chains (checkpointed
    under ``checkpoint``, else in a temporary folder) unless its chains run
    on another ``executor``.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-auto-") as folder:
        pilots_folder = checkpoint_part(checkpoint, "auto pilots") or Path(folder)
        return _sample_auto(program, model, data, auto, seed, progress, say, checkpoint, executor,
                            pilots_folder)  # fmt: skip


def _sample_auto(
    program, model, data, auto, seed, progress, say, checkpoint, executor, folder
) -> SampleResult:
    start = time.perf_counter()
    seeds = spawn_seeds(seed, SEEDS)
    if auto.pilot_draws > auto.draws:  # a pilot is the start of its full run: never longer than it
        say(f"auto: pilots of {auto.draws} draws per chain, the run's own length (pilot_draws = "
            f"{auto.pilot_draws} is longer than the run's draws)")  # fmt: skip
        auto = replace(auto, pilot_draws=auto.draws)
    chain_draws = auto.chains * auto.draws
    quick, projected = _quick_nuts(model, auto)
    if quick:
        result = _nuts_at_once(quick, model, auto, seed, seeds, progress, say, checkpoint, start)
        rhat = split_rhat(_unconstrained(result))
        if result.interrupted:  # a stopped run keeps its draws, and stops
            return result
        if not rhat > CHECK_RHAT:
            _check_modes(result, model, seeds["warmup"], say)
            return result
        say(f"auto: Stan's NUTS did not mix (R-hat {rhat:.3g}, above {CHECK_RHAT:g}): its "
            f"{time.perf_counter() - start:.1f} s are charged, and the others are piloted")  # fmt: skip
    candidates, skipped = _candidates(auto, program, data)
    candidates.sort(key=lambda candidate: _order(candidate[0]))
    shared = [(spec, s) for spec, s in candidates if spec.auto in ("warm", "approximation", "modes")]
    adaptation, warm_seconds, warm_report = None, 0.0, {}
    if shared:
        adaptation, warm_seconds, warm_report = _shared_warm_up(model, shared, auto, seeds, progress, say)
    if adaptation is not None and (adaptation.warmup == NUTS_WARMUP or projected < NUTS_FIRST_SECONDS):
        candidates.sort(key=lambda candidate: candidate[0].auto != "own-warmup")  # NUTS, the baseline, first
    race = Race(chain_draws, float(np.log10(auto.chains * auto.pilot_draws)))
    pilots: list[Pilot] = []
    for index, (spec, settings) in enumerate(candidates):
        if spec.auto not in ("own-warmup", "warm", "approximation") or adaptation is None:
            continue
        if race.spent() and spec.auto != "own-warmup":
            pilots.append(Pilot(spec.name, spec.auto, spec.label, note=f"not piloted: {race.spent()[9:]}"))
        elif spec.auto == "approximation" and warm_report.get("no_mode"):
            label = method_label(make_config(spec.name, settings))
            pilots.append(Pilot(spec.name, spec.auto, label, note=f"not piloted: {warm_report['no_mode']}"))
            say(f"auto: {label} not piloted: its approximation is built about the mode, and "
                f"{warm_report['no_mode']}")  # fmt: skip
        elif far := _far_gaussian(spec, settings, warm_report):
            label = method_label(make_config(spec.name, settings))
            pilots.append(Pilot(spec.name, spec.auto, label, note=f"not piloted: {far}"))
            say(f"auto: {label} not piloted: {far}")
        elif spec.auto == "own-warmup":
            pilots.append(_nuts_pilot(spec, model, program.name, adaptation, warm_seconds, auto, race,
                                      spawn_seed(seed, 1, index), seeds, folder, say))  # fmt: skip
        else:
            pilots.append(_pilot(spec, settings, model, data, adaptation, warm_seconds, auto, seed, seeds,
                                 race, folder, say))  # fmt: skip
        race.enter(pilots[-1])
    reference = _agreement(pilots)
    modes = _modes(pilots)
    names = [_bracketed(name) for name in model.param_unc_names()]
    funnel = _funnel(pilots, reference, names, getattr(model, "log_scale_coordinates", lambda: None)())
    if funnel is not None:
        say(f"auto: the pilots' draws show {funnel.message()}")
    tempering = [(spec, s) for spec, s in candidates if spec.auto == "modes"]
    if modes["disagree"]:
        say(f"auto: the pilots' chains disagree about the modes (chain means {modes['gap']:.1f} within-chain "
            f"sds and {modes['z']:.1f} standard errors apart, above {MODE_GAP:g} and {MODE_Z:g}): piloting "
            "tempering too")  # fmt: skip
        race = Race(chain_draws, race.cap)  # tempering races only against tempering
        for spec, settings in tempering:
            pilots.append(_pilot(spec, settings, model, data, adaptation, warm_seconds, auto, seed, seeds,
                                 race, folder, say))  # fmt: skip
            race.enter(pilots[-1])
        reference = _agreement(pilots)
    eligible = [
        p for p in pilots if p.result is not None and not p.note and np.isfinite(p.projected(chain_draws))
    ]
    if modes["disagree"] and any(p.role == "modes" for p in eligible):
        eligible = [p for p in eligible if p.role == "modes"]
        why = "the pilots disagree about the modes, so only tempering is trusted; the highest projected ESS/s"
    elif modes["disagree"]:
        why = (
            "the pilots disagree about the modes and no tempering method could run "
            f"({'; '.join(skipped.values()) or 'none'}); the highest projected ESS/s, "
            "which may miss a mode"
        )
    else:
        agreeing = f", among pilots agreeing with {reference.method}'s" if reference is not None else ""
        why = f"the highest projected ESS/s with warm-up and set-up charged{agreeing}"
    best = _choose(eligible, chain_draws)
    if best is not None and best is not _choose(eligible, chain_draws, margin=1.0):
        why += f"; NUTS kept, as no other projected {NUTS_MARGIN:g}x its ESS/s (within the pilots' error)"
    pilot_seconds = time.perf_counter() - start
    others = ", ".join(
        f"{p.method} {p.projected(chain_draws):.3g}" for p in pilots if p is not best and p.result is not None
    )
    nuts_method = next(spec.name for spec in METHODS.values() if spec.auto == "own-warmup")
    if best is None:
        best_method = nuts_method
        line = f"auto: no pilot gave a usable estimate, so {best_method} runs"
    else:
        best_method = best.method
        line = (f"auto: chose {best.method} (projected {best.projected(chain_draws):.3g} ESS/s"
                f"{'; ' + others if others else ''}): {why}")  # fmt: skip
    rows = [p.row(chain_draws, best_method) for p in pilots]
    for row in rows:
        say("auto pilot: " + pilot_line(row))
    say(line + f"; {pilot_seconds:.1f} s so far (the shared warm-up, set-ups, pilots) are charged, less the "
        "chosen pilot's draws, which its full run keeps")  # fmt: skip
    checks = []
    while (
        best is not None
        and best.role != "own-warmup"
        and (executor is None or isinstance(executor, SerialExecutor))
    ):
        check = _check_choice(best, eligible, model, data, adaptation, auto, seed, seeds, say)
        checks.append(check)
        if check["held"]:
            break
        best = _choose([p for p in eligible if not p.note], chain_draws)
        best_method = best.method if best is not None else nuts_method
        line += f"; then {check['note']}"
        pilot_seconds = time.perf_counter() - start
    rows = [p.row(chain_draws, best_method) for p in pilots]
    result = _full_run(best, best_method, model, data, adaptation, warm_seconds, pilot_seconds, auto, seed,
                       seeds, progress, say, checkpoint, executor)  # fmt: skip
    # The verdict's findings: modes the pilots saw that the method run cannot reach, and (a kernel's run
    # checks it itself) modes the shared warm-up found that NUTS's draws never came near.
    modes["unresolved"] = modes["disagree"] and (best is None or best.role != "modes")
    if warm_report.get("mode_points") and isinstance(result.run, NutsFit):
        names = [_bracketed(name) for name in model.param_unc_names()]
        result.reports["modes"] = visited_modes_report(warm_report["mode_points"], warm_report["mode_runs"],
                                                       _unconstrained(result), names)  # fmt: skip
    resumed = getattr(result.run, "resumed_draws", None)
    result.reports["auto"] = {
        "chosen": best_method,
        "reason": line,
        "formula": FORMULA,
        "chains": auto.chains,
        "draws": auto.draws,
        "pilot_draws": auto.pilot_draws,
        "pilot_seconds": pilot_seconds,
        "continued_draws": [] if resumed is None else [int(d) for d in resumed],
        "reference": None if reference is None else reference.method,
        "warmup": warm_report,
        "modes": modes,
        "funnel": None if funnel is None else funnel.to_dict(),
        "skipped": skipped,
        "pilots": rows,
        "checks": checks,
    }
    return result


def _choose(eligible: list[Pilot], chain_draws: int, margin: float | None = None) -> Pilot | None:
    """The pilot of highest projected ESS/s; NUTS's unless another projects ``margin`` (by default
    :data:`NUTS_MARGIN`) times its ESS/s."""
    margin = NUTS_MARGIN if margin is None else margin
    best = max(eligible, key=lambda p: p.projected(chain_draws), default=None)
    nuts = next((p for p in eligible if p.role == "own-warmup"), None)
    if best is None or nuts is None:
        return best
    return nuts if best.projected(chain_draws) < margin * nuts.projected(chain_draws) else best


def _check_choice(best, eligible, model, data, adaptation, auto, seed, seeds, say) -> dict[str, Any]:
    """Run the chosen kernel to :data:`CHECK_SHARE` of its draws, then check the choice with its ESS so far.

    The draws are the start of its full run (checkpointed, as its pilot's).
    Where their ESS per draw makes another eligible pilot the choice, the
    chosen pilot is marked (its note) and its ESS per draw is the one
    measured; the caller chooses again. Returns what was checked.
    """
    chain_draws = auto.chains * auto.draws
    draws = max(2 * auto.pilot_draws, int(CHECK_SHARE * auto.draws))
    check = {"method": best.method, "draws": min(draws, auto.draws), "pilot_ess_per_draw": best.ess_per_draw,
             "ess_per_draw": None, "rhat": None, "held": True, "note": ""}  # fmt: skip
    if draws >= auto.draws:
        return check
    start = time.perf_counter()
    config = _full_config(best, best.method, adaptation, auto)
    stop = _Stop(Race(chain_draws, float("inf")), draws, auto.chains, best.warmup_seconds, False)
    result = run_sampler(config, model, data, adaptation, seed=seed, seeds=seeds, charged={}, describe=False,
                         checkpoint=best.checkpoint, stop=stop)  # fmt: skip
    draws_so_far = _unconstrained(result)
    measured, rhat = _ess_per_draw(draws_so_far), worst_rhat(draws_so_far)
    check.update(ess_per_draw=measured, rhat=rhat, seconds=time.perf_counter() - start)
    piloted = best.ess_per_draw
    best.ess_per_draw = measured
    others = [p for p in eligible if not p.note and p is not best]
    unmixed = rhat > CHECK_RHAT and bool(others)
    again = _choose(others, chain_draws) if unmixed else _choose([best, *others], chain_draws)
    if again is best:
        best.ess_per_draw = piloted  # the pilot's row keeps its pilot's figures
        say(f"auto: {best.method} after {draws} draws per chain: ESS/draw {measured:.3g} (its pilot's "
            f"{piloted:.3g}), R-hat {rhat:.3g}; the choice holds")  # fmt: skip
        return check
    check["held"] = False
    if unmixed:
        check["note"] = (
            f"after {draws} draws per chain {best.method}'s chains disagree (R-hat {rhat:.3g}, above "
            f"{CHECK_RHAT:g}; ESS/draw {measured:.3g}, its pilot's {piloted:.3g})"
        )
    else:
        check["note"] = (
            f"after {draws} draws per chain {best.method}'s ESS/draw was {measured:.3g}, not its pilot's "
            f"{piloted:.3g}: projected {best.projected(chain_draws):.3g} ESS/s, below {again.method}'s "
            f"{again.projected(chain_draws):.3g}"
        )
    best.note = f"checked in its full run: {check['note']}"
    say(f"auto: {check['note']}; {again.method} runs instead (the {check['seconds']:.1f} s spent are "
        "charged)")  # fmt: skip
    return check


def _quick_nuts(model, auto: AutoSettings) -> tuple[str, float]:
    """Why Stan's NUTS runs at once, without pilots (its whole run is projected short), or ""; the projection.

    A whole run of C chains x (warm-up + D) iterations is projected at
    :data:`QUICK_LEAPFROGS` gradients per iteration, each as long as one
    timed in C++ at the unconstrained origin (the fastest of three timings,
    as a pause only ever slows one), the chains in parallel on the cores
    there are. Below :data:`QUICK_NUTS_SECONDS` no pilot could pay for
    itself: a Laplace warm-up and a pilot take about a second in Python.
    The projection is infinite where the program cannot be evaluated at the origin.
    """
    import os

    try:
        point = np.zeros(model.dim)
        per_gradient = model.time_log_density_gradient(point, 10)
        repeats = int(min(max(0.0005 / per_gradient, 10), 10_000))
        per_gradient = min(model.time_log_density_gradient(point, repeats) for _ in range(3))
    except Exception:  # a program that cannot be evaluated at the origin: the pilots will tell
        return "", float("inf")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    iterations = (DEFAULT_NUTS_WARMUP + auto.draws) * -(-auto.chains // min(auto.chains, cores))
    projected = per_gradient * QUICK_LEAPFROGS * iterations
    if not np.isfinite(projected):
        return "", float("inf")
    if projected >= QUICK_NUTS_SECONDS:
        return "", float(projected)
    return (
        f"a whole Stan NUTS run is projected at {projected:.2g} s ({per_gradient * 1e6:.3g} us per gradient, "
        f"{QUICK_LEAPFROGS} per iteration), under {QUICK_NUTS_SECONDS:g} s: no pilot could pay for itself, "
        "so Stan's NUTS runs at once, with its own warm-up"
    ), float(projected)


def _nuts_at_once(why, model, auto, seed, seeds, progress, say, checkpoint, start) -> SampleResult:
    """Stan's NUTS as ``--method nuts --set metric=dense`` runs it (the same seeds, so the same draws; the
    diagonal metric above :data:`QUICK_DENSE_MAX_DIM` parameters), the check charged.

    Where its chains then disagree (R-hat above :data:`CHECK_RHAT`: stuck,
    as on posteriordb's ``arma11`` from some of Stan's random starts),
    :func:`sample_auto` goes on to the warm-up and the pilots, this run's
    seconds charged; its checkpoint is a part of its own so that NUTS's
    later run cannot resume these draws. It is said as tried first, not
    chosen: the choice is the reason recorded, and said, once it is kept.
    """
    method = next(spec.name for spec in METHODS.values() if spec.auto == "own-warmup")
    metric = "dense" if model.dim <= QUICK_DENSE_MAX_DIM else "diag"
    why = f"{why} (metric {metric})"
    line = f"auto: chose {method}: {why}"
    say(f"auto: trying {method} first: {why}; it is kept if its chains agree (split R-hat up to "
        f"{CHECK_RHAT:g})")  # fmt: skip
    checked = time.perf_counter() - start
    config = make_config(method, {"chains": auto.chains, "draws": auto.draws, "metric": metric})
    result = run_nuts(config, model, model.name.removesuffix("_model"), seed, seeds, None, progress, say,
                      checkpoint_part(checkpoint, "auto quick nuts"))  # fmt: skip
    result.charged_seconds["auto check"] = checked
    result.reports["auto"] = {
        "chosen": method, "reason": line, "formula": FORMULA, "chains": auto.chains, "draws": auto.draws,
        "pilot_draws": auto.pilot_draws, "pilot_seconds": checked, "continued_draws": [], "reference": None,
        "warmup": {}, "modes": {}, "funnel": None, "skipped": {}, "pilots": [],
    }  # fmt: skip
    return result


def _check_modes(result: SampleResult, model, seed: int, say) -> None:
    """The Laplace warm-up's modes check, on Stan's NUTS run at once: L-BFGS from
    :data:`~stanaccel.sampling.warmup.MODE_STARTS` mirrored starts (the Laplace warm-up's, at its seed),
    and where it ends at separated modes (:func:`~stanaccel.sampling.warmup.modes_apart`, in the draws'
    within-chain sds), whether NUTS's draws came near each. Chains that all settled in one of two modes
    agree (R-hat near 1), and only this tells. Sets ``reports["modes"]`` (what the verdict reads), its
    seconds charged as part of "auto check"; none above :data:`MODES_CHECK_MAX_DIM` parameters.
    """
    start = time.perf_counter()
    if model.dim > MODES_CHECK_MAX_DIM:
        result.reports["modes"] = {"not_checked": f"{model.dim} parameters, above {MODES_CHECK_MAX_DIM}"}
        return
    draws = _unconstrained(result)
    try:
        starts = mirrored_starts(model, MODE_STARTS, seed)
        modes = modes_from_starts(model, MODE_STARTS, inits=starts, seed=seed, jacobian=True)
    except StanError as error:  # L-BFGS ran off (improper) or failed: no modes to compare
        modes, why = [], " ".join(str(error).split())[:200]
    except KeyboardInterrupt:  # NUTS's draws are complete: keep them, unchecked
        modes, why = [], "stopped (Ctrl-C)"
    else:
        why = "" if len(modes) > 1 else f"{len(modes)} of {MODE_STARTS} L-BFGS runs ended, none to compare"
    found: dict[str, Any] = {}
    if len(modes) > 1:
        best = int(np.argmax([m.log_density for m in modes]))
        runs = f"L-BFGS from {len(modes)} starts"
        modes_apart(model, runs, "NUTS", [m.point for m in modes], best, within_chain_sd(draws), found)
    if found.get("mode_points"):
        names = [_bracketed(name) for name in model.param_unc_names()]
        report = visited_modes_report(found["mode_points"], found["mode_runs"], draws, names,
                                      found_in="auto's modes check")  # fmt: skip
    else:
        report = {"modes_found": min(len(modes), 1), "message": ""}
        if why:
            report["not_checked"] = why
    seconds = time.perf_counter() - start
    report.update(
        {key: found[key] for key in ("mode_separation", "mode_barrier", "mode_points") if key in found}
    )
    result.reports["modes"] = {**report, "seconds": seconds}
    result.charged_seconds["auto check"] = result.charged_seconds.get("auto check", 0.0) + seconds
    if report["message"]:
        say(f"modes: {report['message']}")


def _order(spec: MethodSpec) -> int:
    return PILOT_ORDER.index(spec.auto) if spec.auto in PILOT_ORDER else len(PILOT_ORDER)


def pilot_line(row: dict[str, Any]) -> str:
    """One row of the pilot table (``reports["auto"]["pilots"]``) as the run prints it."""

    def num(value):
        return (
            "-" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.3g}"
        )

    return (
        f"{row['method']:<5} warm-up {row['warmup'] or '-'} {num(row['warmup_s'])} s, set-up "
        f"{num(row['setup_s'])} s, ESS/draw {num(row['pilot_ess_per_draw'])}, "
        f"s/draw {num(row['s_per_draw'])}, pilot {num(row['pilot_s'])} s, "
        f"projected {num(row['projected_ess_per_s'])} ESS/s"
        + (f", slowest {row['slowest']}" if row.get("slowest") else "")
        + (" (the funnel)" if row.get("slowest_in_funnel") else "")
        + (" (chosen)" if row["chosen"] else "")
        + (f" [{row['note']}]" if row["note"] else "")
    )


def _candidates(auto: AutoSettings, program, data) -> tuple[list[tuple[MethodSpec, dict]], dict[str, str]]:
    """The table's candidates whose needs the program meets, with their settings; why the others are not."""
    out, skipped = [], {}
    for spec in METHODS.values():
        if spec.auto is None:
            continue
        settings = dict(spec.auto_settings)
        if spec.auto == "approximation":
            settings.update(automatic_approximation(auto, program, data))
        try:
            check_program(make_config(spec.name, settings), program, data)
        except (ConfigError, ProgramConventionError, ValueError) as error:
            skipped[spec.name] = f"{spec.name} not tried: {str(error).split('. ')[0]}"
            continue
        out.append((spec, settings))
    return out, skipped


def _nuts_pilot(spec, model, name, adaptation, warm_seconds, auto, race, seed, seeds, folder, say) -> Pilot:
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
    start = time.perf_counter()
    pilot = Pilot(spec.name, spec.auto, spec.label, warmup=adaptation.warmup, checkpoint=Path(folder))
    pilot.warmup_seconds, pilot.setup_seconds = warm_seconds, 0.0
    state = adaptation.warmup_state
    dense = adaptation.dense if adaptation.dense is not None and model.dim <= DENSE_MAX_DIM else None
    if dense is not None or state is None or not state.has_step_size or len(state.step_size) != auto.chains:
        metric = f"the {adaptation.warmup} fit's dense metric" if dense is not None else "its metric"
        say(f"auto: pilot of {spec.label} from the shared warm-up's starts and {metric}, {auto.chains} "
            f"chains x ({NUTS_PILOT_STEP} step-size iterations + {auto.pilot_draws})")  # fmt: skip
        pilot.label = f"{spec.label} (dense metric)" if dense is not None else spec.label
        state = _nuts_step(pilot, model, adaptation, auto, race, seed, say, dense)
        if state is None:
            pilot.pilot_seconds = time.perf_counter() - start
            return pilot
    else:
        say(f"auto: pilot of {spec.label}, {auto.chains} chains x {auto.pilot_draws} draws continuing the "
            "shared warm-up (the first draws of its full run)")  # fmt: skip
    pilot.state = replace(state, seconds=warm_seconds + pilot.setup_seconds)
    config = make_config(spec.name, {"chains": auto.chains, "draws": auto.pilot_draws})
    result = run_nuts(config, model, name, seed, seeds, warmup_from=pilot.state, checkpoint=pilot.checkpoint,
                      checkpoint_draws=auto.pilot_draws)  # fmt: skip
    if result.run.interrupted:
        raise KeyboardInterrupt
    sampling = float(np.max(result.run.chain_seconds))
    return _measured(pilot, result, sampling, time.perf_counter() - start)


def _nuts_step(pilot, model, adaptation, auto, race, seed, say, dense=None) -> WarmupState | None:
    """NUTS's step sizes adapted alone from a cheap warm-up, as a warm-up state; None if NUTS lost the race.

    The metric is the warm-up's (diagonal), or ``dense``, the full covariance of its Gaussian.

    Its seconds are the pilot's set-up; the race may drop NUTS after the
    probe's iterations or the step-size ones, at its seconds per draw (the
    leapfrog steps of their last half, once the step size has settled).
    """
    start = time.perf_counter()
    metric = np.asarray(adaptation.inv_metric if dense is None else dense)
    kind = "diag" if metric.ndim == 1 else "dense"
    initial = adaptation.step_size or 1.0
    for iterations in (NUTS_PILOT_PROBE, NUTS_PILOT_STEP):
        starts = adaptation.starts[np.arange(auto.chains) % len(adaptation.starts)]
        fit = step_size_fit(model, starts, metric, iterations, seed, False, step_size=initial)
        if fit.interrupted:
            raise KeyboardInterrupt
        chain = float(np.max(fit.chain_seconds))
        leapfrogs = np.asarray(fit.warmup_sample_stats["n_steps"], dtype=float)
        per_draw = chain / auto.chains / leapfrogs.sum(axis=1).max() * leapfrogs[:, iterations // 2 :].mean()
        pilot.setup_seconds = time.perf_counter() - start
        if iterations == NUTS_PILOT_PROBE and chain < NUTS_PROBE_SECONDS:
            continue  # too short to time: a pause is most of it
        pilot.note = race.lost(per_draw, pilot.warmup_seconds + pilot.setup_seconds,
                               f"after {iterations} step-size iterations", nuts=True)  # fmt: skip
        if pilot.note:
            pilot.seconds_per_draw = per_draw
            say(f"auto: {pilot.label} {pilot.note}")
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


def _shared_warm_up(model, shared, auto, seeds, progress, say):
    """The cheap warm-up the candidates share: Laplace, else Pathfinder, else NUTS's; its seconds, report.

    Where Laplace's L-BFGS failed from every start and NUTS's warm-up is
    shared, the report says so (``no_mode``): the approximations about the
    mode are then not piloted (their own search, from the origin, fails as
    surely, and costs as much).

    It runs for the full run's chains (their start points) with the settings
    of a candidate that moves with an HMC step, so that a step size is adapted.
    """
    spec, settings = next(((s, k) for s, k in shared if s.uses_step_size(make_config(s.name, k))), shared[0])
    charged: dict[str, float] = {}
    report: dict[str, Any] = {}
    found: dict[str, Any] = {}  # the modes a cheap warm-up found, kept when the next one is tried
    no_mode = None
    laplace_k = None
    for index, kind in enumerate(WARMUPS_TRIED):
        config = make_config(spec.name, {**settings, "chains": auto.chains, "warmup": kind})
        adaptation, report = cheap_warm_up(model, config, seeds, progress, say, charged, _next_warm_up(index))
        found = {key: report[key] for key in ("mode_points", "mode_runs") if key in report} or found
        if kind == "laplace" and str(report.get("fallback", "")).startswith("L-BFGS failed"):
            no_mode = "Stan's L-BFGS found no mode from any start of the Laplace warm-up"
        if kind == "laplace":
            laplace_k = report.get("pareto_k")
        if adaptation is not None:
            refused = {"laplace_pareto_k": laplace_k} if kind != "laplace" and laplace_k is not None else {}
            adaptation.report = {**report, **found, **refused, "tried": list(charged)}
            return adaptation, sum(charged.values()), adaptation.report
        if _hopeless(laplace_k):
            break
    config = make_config(spec.name, {**settings, "chains": auto.chains, "warmup": DEFAULT_NUTS_WARMUP})
    adaptation = nuts_warm_up(model, config, seeds, None, progress, say, charged)
    report = {**report, **found, "used": "nuts", "tried": list(charged)}
    if laplace_k is not None:
        report["laplace_pareto_k"] = laplace_k
    # Modes a cheap warm-up found travel with it: every run from it checks that its draws visit them.
    adaptation.report = {**report, "no_mode": no_mode} if no_mode else report
    return adaptation, sum(charged.values()), adaptation.report


def _next_warm_up(index: int):
    """What ``auto`` runs if cheap warm-up ``index`` of :data:`WARMUPS_TRIED` is refused, from its report."""
    if index + 1 == len(WARMUPS_TRIED):
        return None  # cheap_warm_up's own: NUTS's warm-up

    def instead(report: dict[str, Any]) -> str:
        k = report.get("pareto_k") if WARMUPS_TRIED[index] == "laplace" else None
        if _hopeless(k):
            return (
                f"auto does not try {WARMUPS_TRIED[index + 1]} after a Pareto k of {HOPELESS_K:g} or more, "
                f"and Stan's NUTS warm-up runs instead ({DEFAULT_NUTS_WARMUP} iterations)"
            )
        return f"auto tries {WARMUPS_TRIED[index + 1]} next"

    return instead


def _far_gaussian(spec: MethodSpec, settings: dict[str, Any], warm_report: dict[str, Any]) -> str:
    """Why a candidate proposing from a Gaussian is not piloted where the Laplace fit's Pareto k is
    :data:`HOPELESS_K` or more, or "".

    Such a k says the posterior is far from any Gaussian (a funnel, heavy
    tails, a 1000-dim latent field): IMH's and pCN's proposals about the
    warm-up's Gaussian, and an approximation method's over the Laplace
    Gaussian, would almost all be refused (on a 1003-parameter stochastic
    volatility model, k = 54: pCN's and IMH's pilots projected under half
    of NUTS's ESS/s, for 2.7 s of pilots).
    """
    laplace = settings.get("approx", {}).get("kind") == "laplace" if spec.auto == "approximation" else False
    if not (spec.gaussian or laplace):
        return ""
    k = warm_report.get("laplace_pareto_k")
    if k is None and warm_report.get("warmup") == "laplace":
        k = warm_report.get("pareto_k")
    if not _hopeless(k):
        return ""
    proposes = "its approximation is the Laplace Gaussian" if laplace else "it proposes from a Gaussian"
    return f"{proposes}, and the Laplace fit's Pareto k is {k:.3g} ({HOPELESS_K:g} or more)"


def _hopeless(k) -> bool:
    """Whether a refused Laplace fit's Pareto k ``k`` says its Gaussian is far off (:data:`HOPELESS_K`)."""
    return k is not None and bool(k >= HOPELESS_K)


def _pilot(spec, settings, model, data, adaptation, warm_seconds, auto, seed, seeds, race, folder,
           say) -> Pilot:  # fmt: skip
    """A candidate's pilot after the shared warm-up: the start of its full run, unless it loses the race.

    Its own set-up (tuning, approximation) is measured; its chains are
    checkpointed in ``folder`` / its name for the full run to continue.
    Once the race has a leader, the pilot first draws a probe
    (:data:`PROBE_SHARE`): a candidate whose probe's ESS, with
    :data:`PROBE_MARGIN` to spare, cannot beat the leader is dropped there.
    """
    values = {**settings, "chains": auto.chains, "draws": auto.draws}
    config = make_config(spec.name, values)
    pilot = Pilot(spec.name, spec.auto, method_label(config), warmup=adaptation.warmup, settings=settings,
                  checkpoint=Path(folder) / spec.name)  # fmt: skip
    pilot.warmup_seconds = warm_seconds
    say(
        f"auto: pilot of {pilot.label}, {auto.chains} chains x {auto.pilot_draws} draws after the shared "
        "warm-up (the first draws of its full run)"
    )
    start = time.perf_counter()
    probe = max(auto.pilot_draws // PROBE_SHARE, PROBE_DRAWS)
    stages = [probe, auto.pilot_draws] if race.best and probe < auto.pilot_draws else [auto.pilot_draws]
    for draws in stages:
        stop = _Stop(race, draws, auto.chains, warm_seconds, spec.positive)
        try:
            result = run_sampler(config, model, data, adaptation, seed=seed, seeds=seeds, charged={},
                                 describe=False, checkpoint=pilot.checkpoint, stop=stop)  # fmt: skip
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


def _agreement(pilots: list[Pilot]) -> Pilot | None:
    """Mark each pilot whose posterior means differ from the reference pilot's beyond a Bonferroni z limit.

    The reference is the NUTS pilot; where NUTS was dropped, the finished
    pilot on the full density ("warm") of the highest ESS per draw; where
    those were dropped too, the one of them with the most draws before it
    was, if it has :data:`PROBE_DRAWS` per chain (fewer give no MCSE to
    judge by: 9 draws per chain of a dropped HMC probe put a correct ``dc``
    pilot 5 MCSE off). Returns it (None: no check).
    """
    drawn = [p for p in pilots if p.result is not None]
    full = [p for p in pilots if p.role == "warm" and (p.partial or p.result) is not None]
    stopped = [p for p in full if p.result is None and p.partial.num_draws >= PROBE_DRAWS]
    reference = (
        next((p for p in drawn if p.role == "own-warmup"), None)
        or max((p for p in full if p.result is not None), key=lambda p: p.ess_per_draw, default=None)
        or max(stopped, key=lambda p: p.partial.num_draws, default=None)
    )
    if reference is None:
        return None
    mine = (reference.result or reference.partial).to_inference_data()
    others = [p for p in drawn if p is not reference]
    for pilot in others:
        z = reference_z_scores(pilot.result.to_inference_data(), mine)[0]
        limit = norm.ppf(1 - AGREEMENT_P / (2 * max(z.size, 1) * max(len(others), 1)))
        pilot.z_max = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else None
        if pilot.z_max is not None and pilot.z_max > limit and not pilot.note:
            pilot.note = f"disagrees with the {reference.method} pilot (|z| {pilot.z_max:.1f} > {limit:.1f})"
    return reference


def _modes(pilots: list[Pilot]) -> dict[str, Any]:
    """Whether the pilots' chains disagree about the modes (:func:`~stanaccel.diagnostics.modes.mode_gap`)."""
    chains = [chain for p in pilots if p.result is not None for chain in _unconstrained(p.result)]
    gap, z = mode_gap(chains, MODE_ESS, MODE_GAP, MODE_Z)
    return {"gap": gap, "z": z, "limit": MODE_GAP, "z_limit": MODE_Z,
            "disagree": bool(gap > MODE_GAP and z > MODE_Z)}  # fmt: skip


def _funnel(pilots: list[Pilot], reference: Pilot | None, names: list[str], scales) -> Funnel | None:
    """A funnel in the reference pilot's draws (else the longest pilot's); marks each pilot's slowest
    coordinate with its name, and whether it is in the funnel."""
    drawn = [p for p in pilots if p.result is not None]
    source = reference if reference is not None and reference.result is not None else None
    source = source or max(drawn, key=lambda p: p.result.num_draws, default=None)
    funnel = None if source is None else find_funnel(_unconstrained(source.result), names, scales)
    members = set() if funnel is None else {funnel.scale, *funnel.coupled}
    for pilot in drawn:
        if pilot.slowest is not None:
            pilot.slowest_name = names[pilot.slowest]
            pilot.in_funnel = pilot.slowest_name in members
    return funnel


def _bracketed(name: str) -> str:
    """An unconstrained coordinate's name as Stan writes it: ``b.2.1`` as ``b[2,1]``."""
    variable, *index = name.split(".")
    return f"{variable}[{','.join(index)}]" if index else variable


def _unconstrained(result: SampleResult) -> np.ndarray:
    """(chains, draws, dim) of a result's unconstrained draws."""
    run = result.run
    return np.asarray(run.draws_unconstrained if isinstance(run, NutsFit) else run.positions)


def _full_nuts(best, method, model, pilot_seconds, auto, seed, seeds, progress, say, checkpoint):
    """Stan's NUTS at full length: from its pilot's warm-up state, continuing its pilot's draws.

    Without a pilot (none gave a usable estimate) it runs with its own warm-up.
    """
    name = model.name.removesuffix("_model")
    config = make_config(method, {"chains": auto.chains, "draws": auto.draws})
    if best is None or best.state is None:
        result = run_nuts(config, model, name, seed, seeds, None, progress, say, checkpoint)
        result.charged_seconds["auto pilots"] = pilot_seconds
        return result
    say(f"{method}: its full run continues the {auto.chains} chains of its pilot, with no warm-up of its own")
    result = run_nuts(config, model, name, seed, seeds, warmup_from=best.state, progress=progress,
                      checkpoint=best.checkpoint, checkpoint_draws=auto.pilot_draws)  # fmt: skip
    result.charged_seconds.pop(BORROWED, None)
    kept = best.result.run.wall_seconds  # the pilot's draws, in the full run's time
    result.charged_seconds["warmup"] = best.warmup_seconds
    if best.setup_seconds:  # its step size adapted alone, after a cheap warm-up
        result.charged_seconds["step size"] = best.setup_seconds
    spent = pilot_seconds - best.warmup_seconds - best.setup_seconds - kept
    result.charged_seconds["auto pilots"] = max(spent, 0.0)
    result.adaptation = best.state
    return result


def _full_config(best: Pilot, method: str, adaptation, auto: AutoSettings):
    """The settings of a chosen kernel's full run: its pilot's, at full length, with the step it tuned."""
    settings = {**best.settings, "chains": auto.chains, "draws": auto.draws}
    # The warm-up that ran, so that the settings say it (not the method's default).
    settings["warmup"] = adaptation.warmup if adaptation.warmup in WARMUPS_TRIED else DEFAULT_NUTS_WARMUP
    return make_config(method, {**settings, **_tuned_step(METHODS[method], best.result.config)})


def _full_run(best, method, model, data, adaptation, warm_seconds, pilot_seconds, auto, seed, seeds, progress,
              say, checkpoint, executor) -> SampleResult:  # fmt: skip
    """The chosen method at full length: a kernel method continues its pilot's chains, with its tuned step."""
    spec = METHODS[method]
    if spec.auto == "own-warmup":
        return _full_nuts(best, method, model, pilot_seconds, auto, seed, seeds, progress, say, checkpoint)
    reused = _tuned_step(spec, best.result.config)
    config = _full_config(best, method, adaptation, auto)
    own = best.setup_seconds - best.result.charged_seconds.get("tuning", 0.0)
    local = executor is None or isinstance(executor, SerialExecutor)
    kept = best.result.run.wall_seconds if local else 0.0  # the pilot's draws, in the full run's time
    charged = {"warmup": warm_seconds, "auto pilots": max(pilot_seconds - warm_seconds - own - kept, 0.0)}
    if local:
        say(f"{method}: its full run continues the {auto.chains} chains of its pilot")
    result = run_sampler(config, model, data, adaptation, seed=seed, seeds=seeds, charged=charged, say=say,
                         progress=progress, checkpoint=best.checkpoint if local else checkpoint,
                         executor=executor)  # fmt: skip
    result.sources.update({key: "auto pilot" for key in reused})
    result.adaptation = adaptation.warmup_state
    if adaptation.report:
        result.reports["warmup"] = adaptation.report
    return result
