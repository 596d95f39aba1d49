"""Tuning a sampler's settings by Bayesian optimisation on short chains (``stanaccel sample --tune``).

After the warm-up, each trial runs the sampler with one candidate setting
for a few short chains from the warm-up's start points and scores them (by
default ESS per second of the sampling, the trial's own cost counted); the
tuner (:func:`stanaccel.tuning.bayesian_optimisation`) chooses the next
setting. Every trial's time is charged to the real run as "tuning", so a
tuned sampler's ESS per second counts what finding its settings cost.

Tuning cannot make things worse (:func:`tune_settings`): the first two
trials measure the default setting (what the method uses without
``--tune``) with two seeds, which also measures the trials' noise; the
search's best setting is measured a second time, and it replaces the
default only if its mean score beats the default's by more than the noise
(the larger spread of the two repeated measurements). A trial that fails
(an error building or running the sampler, a non-finite score) is recorded
with its reason and scores as the worst; the search goes on.

The default search spaces (:func:`default_space`, each method's ``space`` in
:mod:`stanaccel.sampling.methods`) are ranges around what the warm-up tuned,
on the settings the papers name as hard to set: HMC's step size and number
of steps, the pCN step, the tempering ladder (``beta_min`` and ``levels``;
for subsampled ladders no smaller than the smallest subset the program
accepts), the discretizing chain's ``moves`` and ``jump``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from stanaccel.diagnostics.metrics import worst_bulk_ess
from stanaccel.sampling.config import OBJECTIVES, ConfigError, SamplerConfig, check_setting, keys
from stanaccel.sampling.methods import METHODS, method_spec
from stanaccel.sampling.run import run_sampler
from stanaccel.stan.errors import StanDataError
from stanaccel.tuning import (
    Space,
    TuningResult,
    autocorrelation_objective,
    bayesian_optimisation,
)
from stanaccel.tuning.bayesopt import Trial, TrialFailed, evaluate

EXTRA_TRIALS = 3
"""Trials of the budget not spent searching: the default twice and the search's best once more."""


@dataclass(frozen=True)
class TuneSpec:
    """How ``sample(..., tune=...)`` tunes: the trials' budget and length, the objective and the space.

    Attributes
    ----------
    budget : int
        Trials (short runs), at least 4: the default setting twice, the
        search's best once more, and the search (the first few at Sobol
        points, the rest chosen by expected improvement).
    draws, chains : int
        The length of each trial's run.
    objective : str
        "ess-per-second" (smallest bulk ESS over the unconstrained coordinates
        per second of sampling), "ess-per-evaluation" (per density or gradient
        evaluation) or "autocorrelation" (the paper's: 1 minus the mean
        absolute autocorrelation of the log density over lags 1..100, or
        fewer for short trials; it ignores cost, so it suits settings that do
        not change the cost of a step).
    space : Space or dict, optional
        The settings to tune and their ranges (default: :func:`default_space`).
    """

    budget: int = 16
    draws: int = 200
    chains: int = 2
    objective: str = "ess-per-second"
    space: Space | dict | None = None

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"tune objective {self.objective!r} is not one of {', '.join(OBJECTIVES)}")
        for key in ("draws", "chains"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"tune {key} must be at least 1, not {getattr(self, key)}")
        if int(self.budget) < EXTRA_TRIALS + 1:
            raise ConfigError(
                f"tune budget must be at least {EXTRA_TRIALS + 1} (the default setting twice, one search "
                f"trial and its repeat), not {self.budget}; set --tune-budget"
            )
        if self.objective == "autocorrelation" and self.draws < 20:
            raise ConfigError("the autocorrelation objective needs trials of at least 20 draws")


def tune_spec(spec: TuneSpec | dict | bool | None) -> TuneSpec | None:
    """``spec`` as a TuneSpec (``True``: the defaults; a dict: its keys), or None for no tuning."""
    if spec is None or spec is False:
        return None
    if spec is True:
        return TuneSpec()
    if isinstance(spec, TuneSpec):
        return spec
    unknown = set(spec) - set(TuneSpec.__dataclass_fields__)
    if unknown:
        raise ConfigError(
            f"unknown tune option(s) {', '.join(sorted(unknown))}; "
            f"the options are {', '.join(TuneSpec.__dataclass_fields__)}"
        )
    return TuneSpec(**spec)


def default_space(method: str, tuned: dict[str, Any], beta_floor: float = 1e-3) -> Space:
    """The settings of ``method`` worth tuning, with ranges around the warm-up's values.

    ``beta_floor``: the smallest ``beta_min`` of a ladder (for a subsampled
    one, :func:`smallest_beta`); when it leaves no range below 0.5 only the
    number of levels is tuned.

    Raises
    ------
    ConfigError
        For NUTS and latent NUTS (Stan adapts them itself) and for methods
        with nothing to tune here.
    """
    spec = method_spec(method)
    if spec.space is None:
        raise ConfigError(
            f"--tune has no default search space for {method!r}"
            + (" (Stan adapts NUTS itself)" if spec.build is None else "")
            + f"; methods with one: {', '.join(name for name, s in METHODS.items() if s.space)}"
        )
    return Space(spec.space(tuned, beta_floor))


def smallest_beta(config: SamplerConfig, model, data) -> float:
    """The smallest ``beta_min`` whose subset of the observations the program accepts (1e-3 without subsets).

    A subsampled ladder (spt, stt) takes ``round(beta N)`` of the N
    observations at level beta; a subset the program's data block rejects
    (0 observations, or fewer than its ``int<lower=...> N``) cannot be
    sampled. The smallest accepted size k is found by building the program
    on the first k observations (k = 1, 2, ..., at most 8 tries); the floor
    is k / N.
    """
    if "observations" not in config.needs:  # not a subsampled ladder
        return 1e-3
    from stanaccel.sampling.program import observations_for

    observations = observations_for(config, model, data)
    n = observations.check(data)
    size = min(n, 8)
    for k in range(1, min(n, 8) + 1):
        try:
            model.with_data(observations.take(data, np.arange(k)))
        except StanDataError:
            continue
        size = k
        break
    return max(1e-3, size / n)


def checked_space(
    spec: TuneSpec, config: SamplerConfig, tuned: dict[str, Any], beta_floor: float = 1e-3
) -> Space:
    """The space ``spec`` tunes for ``config`` (default: :func:`default_space` around ``tuned``), checked.

    Raises
    ------
    ConfigError
        A setting the method does not have, a range outside the setting's
        allowed values, or a setting the user fixed.
    """
    if isinstance(spec.space, Space):
        space = spec.space
    elif spec.space:
        space = Space.from_dict(spec.space)
    else:
        space = default_space(config.method, tuned, beta_floor)
    space.check(config.method, keys=keys, check_setting=check_setting)
    fixed = sorted(set(space.names) & config.user_keys())
    if fixed:
        raise ConfigError(f"--tune cannot tune {', '.join(fixed)}: you set them; leave them out of the space")
    return space


def with_settings(config: SamplerConfig, values: dict[str, Any]) -> SamplerConfig:
    """``config`` with ``values`` set as if the user had set them (checked, so NumPy scalars become plain)."""
    plain = {k: v.item() if isinstance(v, np.generic) else v for k, v in values.items()}
    checked = {k: check_setting(config.method, k, v) for k, v in plain.items()}
    out = config.replace(**checked)
    object.__setattr__(out, "_user_keys", config.user_keys() | frozenset(checked))
    return out


def score(result, objective: str) -> tuple[float, dict[str, float]]:
    """A trial run's objective value (to maximise) and what it was made of."""
    positions = result.run.positions
    seconds = max(result.run.wall_seconds, 1e-9)
    if objective == "autocorrelation":
        lags = min(100, positions.shape[1] // 4)
        value = autocorrelation_objective(result.run.recorded, max_lag=lags)
        return value, {"seconds": seconds}
    ess = worst_bulk_ess(positions)
    ess = 0.0 if not np.isfinite(ess) else float(ess)
    if objective == "ess-per-second":
        return ess / seconds, {"ess": ess, "seconds": seconds}
    evaluations = max(int(np.sum(result.run.evaluations)), 1)
    return 1000 * ess / evaluations, {"ess": ess, "evaluations": evaluations}


def tune_settings(
    config: SamplerConfig, model, data, adaptation, spec: TuneSpec, *, seed: int, say=None, trained=None
) -> TuningResult:
    """Bayesian optimisation of ``config``'s settings on short runs from ``adaptation`` (a warm-up's).

    Settings the user fixed are not tuned (a space that names one is a
    ConfigError). ``trained``: the autoencoder every trial of a latent
    method shares (:class:`~stanaccel.sampling.training.Trained`).

    The trials, in order: the default setting (the values the method uses
    without tuning: the user's, the warm-up's or the defaults) twice, with
    two seeds; the search (``budget - 3`` trials, never the same setting
    twice); the search's best (highest posterior mean) once more. The best
    is chosen only when its mean score beats the default's by more than the
    noise, the larger spread of the two repeated pairs; otherwise the
    default is kept. A failed trial scores as the worst.

    Returns
    -------
    TuningResult
        ``best``: the settings to use (the default's when kept); ``trials``
        the history; ``seconds`` the time to charge; ``summary`` the
        default's scores, the noise, the number of distinct settings and
        failures, and ``kept_default``.

    Raises
    ------
    ValueError
        Every trial failed, the default's too (its reason named).
    """
    say = say or (lambda line: None)
    began = time.perf_counter()
    tuned = adaptation.settings(model.dim)
    space = checked_space(spec, config, tuned, smallest_beta(config, model, data))
    resolved = config.resolve(tuned)[0]
    default = {name: _plain(getattr(resolved, name)) for name in space.names}
    trial_seeds = iter(np.random.SeedSequence(seed).generate_state(spec.budget + 1))
    record = spec.objective == "autocorrelation"
    used: dict[str, Any] = {}

    def run(settings: dict[str, Any] | None) -> tuple[float, dict]:
        """One trial's score: ``settings`` (None: the default's) on short chains."""
        trial = with_settings(config, {**(settings or {}), "chains": spec.chains, "draws": spec.draws})
        result = run_sampler(
            trial, model, data, adaptation, seed=int(next(trial_seeds)), charged={}, trained=trained,
            describe=False, record_log_density=record,
        )  # fmt: skip
        used.update({name: _plain(getattr(result.config, name)) for name in space.names})
        return score(result, spec.objective)

    def told(trial: Trial) -> Trial:
        """``trial``, said on the console."""
        count[0] += 1
        shown = f"tuning trial {count[0]} ({trial.role}) {_shown(trial.settings)}"
        outcome = (
            f"{spec.objective} {trial.value:.4g}" if trial.ok else f"failed, scored worst ({trial.failed})"
        )
        say(f"{shown}: {outcome} ({trial.seconds:.1f} s)")
        return trial

    def measure(settings: dict[str, Any] | None, role: str) -> Trial:
        """One trial outside the search (the default's, the best's repeat)."""
        used.clear()
        trial = evaluate(lambda s, rng: run(settings), default if settings is None else settings, None, role)
        if settings is None and used:  # a step the sampler tunes itself (pCN's) is known after the run
            trial.settings = dict(used)
        return told(trial)

    def search(settings: dict[str, Any], rng) -> tuple[float, dict]:
        """The search's objective: the trial (said, and failed as :func:`evaluate` would fail it)."""
        trial = told(evaluate(lambda s, rng: run(s), settings, rng))
        if not trial.ok:
            raise TrialFailed(trial.failed)
        return trial.value, trial.details

    count = [0]
    say(f"tuning {', '.join(space.names)} of {config.method}: {spec.budget} trials of "
        f"{spec.chains} x {spec.draws} draws, objective {spec.objective} (the default twice, "
        f"{spec.budget - EXTRA_TRIALS} searching, the best again)")  # fmt: skip
    first = [measure(None, "default"), measure(None, "default again")]
    default = next((t.settings for t in first if t.ok), first[0].settings)
    found = bayesian_optimisation(search, space, budget=spec.budget - EXTRA_TRIALS, seed=seed, observed=first)
    # The best is measured again only if it can still win: a first score at or below the default's
    # mean cannot make a mean of two that beats it by more than their spread.
    best = next((t for t in found.trials if t.role == "search" and t.settings == found.best), None)
    pair = None
    if best is not None and best.value > _mean(first):
        pair = [best, measure(found.best, "best again")]
        found.trials = [*found.trials, pair[1]]
    found.summary = _verdict(found, first, pair, default, spec.objective)
    found.best = found.summary["chosen"]
    found.best_value = _mean(pair) if not found.summary["kept_default"] else _mean(first)
    found.seconds = time.perf_counter() - began
    for line in _report(found.summary, spec.objective):
        say(line)
    return found


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _shown(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in settings.items())


def _mean(trials: list[Trial]) -> float:
    """The mean score of repeated trials of one setting (-inf if any failed)."""
    return float(np.mean([t.value for t in trials])) if all(t.ok for t in trials) else -np.inf


def _verdict(
    found: TuningResult, first: list[Trial], pair: list[Trial] | None, default: dict, objective: str
):
    """The choice between the default and the search's best, and the numbers behind it.

    ``first``: the default's two trials; ``pair``: the best's two (None
    when it was not measured again). The best replaces the default only if
    its mean beats the default's mean by more than the noise: the larger
    spread (absolute difference) of the repeated pairs that succeeded.
    """
    spreads = [abs(a.value - b.value) for a, b in filter(None, [first, pair]) if a.ok and b.ok]
    noise = max(spreads) if spreads else None
    default_score = _mean(first)
    best_score = _mean(pair) if pair is not None else -np.inf
    advantage = best_score - default_score
    if pair is None:
        reason = "no trial beat the default" if found.best != default else "the search's best is the default"
    elif not np.isfinite(best_score):
        reason = "the search's best failed when measured again"
    elif not np.isfinite(default_score):
        reason = "the default failed in a trial"
    elif advantage > (noise or 0.0):
        reason = f"the best's advantage {advantage:.4g} is above the noise {noise:.4g}"
    elif advantage > 0:
        reason = f"the best's advantage {advantage:.4g} is within the noise {noise:.4g}"
    else:
        reason = "the best measured again did not beat the default"
    chosen = pair is not None and np.isfinite(best_score) and advantage > (noise or 0.0)
    return {
        "objective": objective,
        "chosen": dict(found.best if chosen else default),
        "kept_default": not chosen,
        "chosen_score": _finite(best_score if chosen else default_score),
        "reason": reason,
        "default": dict(default),
        "default_scores": [t.value if t.ok else None for t in first],
        "default_spread": abs(first[0].value - first[1].value) if all(t.ok for t in first) else None,
        "best": dict(found.best),
        "best_scores": None if pair is None else [t.value if t.ok else None for t in pair],
        "noise": noise,
        "advantage": _finite(advantage),
        "trials": len(found.trials),
        "distinct": found.distinct,
        "failed": found.failures,
    }


def _finite(value: float) -> float | None:
    """``value`` as a float, or None if it is not finite (for JSON)."""
    return float(value) if np.isfinite(value) else None


def _report(summary: dict, objective: str) -> list[str]:
    """The console lines of a tuning's verdict."""

    def scores(values):
        return " and ".join("failed" if v is None else f"{v:.4g}" for v in values)

    lines = [f"tuning: the default {_shown(summary['default'])} scored {scores(summary['default_scores'])} "
             f"{objective}" + (f" (spread {summary['default_spread']:.3g}, "
             f"{_relative(summary['default_spread'], summary['default_scores'])})"
             if summary["default_spread"] is not None else "")]  # fmt: skip
    if summary["best_scores"] is not None:
        lines.append(
            f"tuning: the search's best {_shown(summary['best'])} scored {scores(summary['best_scores'])}"
        )
    lines.append(
        f"tuning: {summary['trials']} trials of {summary['distinct']} distinct settings, "
        f"{summary['failed']} failed; {summary['reason']}: "
        + ("keeping the default" if summary["kept_default"] else "using the best")
    )
    return lines


def _relative(spread: float, values: list) -> str:
    mean = float(np.mean(values))
    return f"{100 * spread / abs(mean):.0f}% of the mean" if mean else "the mean is 0"
