"""Tuning a sampler's settings by Bayesian optimisation on short chains (``stanaccel sample --tune``).

After the warm-up, each trial runs the sampler with one candidate setting
for a few short chains from the warm-up's start points and scores them (by
default ESS per second of the sampling, the trial's own cost counted); the
tuner (:func:`stanaccel.tuning.bayesian_optimisation`) chooses the next
setting, and after ``budget`` trials the setting with the best predicted
score is used for the real run. Every trial's time is charged to that run
as "tuning", so a tuned sampler's ESS per second counts what finding its
settings cost.

The default search spaces (:func:`default_space`) are ranges around what the
warm-up tuned, on the settings the papers name as hard to set: HMC's step
size and number of steps, the pCN step, the tempering ladder (``beta_min``
and ``levels``), the discretizing chain's ``moves`` and ``jump``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from stanaccel.diagnostics.metrics import bulk_ess
from stanaccel.sampling.config import ConfigError, SamplerConfig, check_setting
from stanaccel.tuning import (
    Integer,
    Real,
    Space,
    TuningResult,
    autocorrelation_objective,
    bayesian_optimisation,
)

OBJECTIVES = ("ess-per-second", "ess-per-evaluation", "autocorrelation")


@dataclass(frozen=True)
class TuneSpec:
    """How ``sample(..., tune=...)`` tunes: the trials' budget and length, the objective and the space.

    Attributes
    ----------
    budget : int
        Trials (short runs), the first few at Sobol points, the rest chosen by expected improvement.
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
        for key in ("budget", "draws", "chains"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"tune {key} must be at least 1, not {getattr(self, key)}")
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


def default_space(method: str, tuned: dict[str, Any]) -> Space:
    """The settings of ``method`` worth tuning, with ranges around the warm-up's values.

    Raises
    ------
    ConfigError
        For NUTS and latent NUTS (Stan adapts them itself) and for methods
        with nothing to tune here.
    """
    step = tuned.get("step_size") or 0.1
    scale = tuned.get("scale") or 0.5
    hmc = [Real("step_size", step / 4, step * 2, log=True), Integer("n_steps", 1, 40)]
    ladder = [Real("beta_min", 1e-3, 0.5, log=True), Integer("levels", 1, 12)]
    pcn = [Real("pcn_step", 1e-3, 2.0, log=True)]
    spaces = {
        "mh": [Real("scale", scale / 4, scale * 4, log=True)],
        "hmc": hmc,
        "pcn": pcn,
        "h-pcn": pcn,
        "ae-pcn": pcn,
        "ae-hmc": [Real("latent_step_size", 1e-3, 1.0, log=True), Integer("latent_n_steps", 1, 40)],
        "pt": ladder,
        "tt": ladder,
        "spt": ladder,
        "stt": ladder,
        "dc": [Integer("moves", 1, 20), Integer("jump", 1, 20)],
        "tt-approx": [Integer("inner_steps", 1, 10)],
    }
    if method not in spaces:
        raise ConfigError(
            f"--tune has no default search space for {method!r}"
            + (" (Stan adapts NUTS itself)" if method in ("nuts", "latent-nuts") else "")
            + f"; methods with one: {', '.join(spaces)}"
        )
    return Space(spaces[method])


def checked_space(spec: TuneSpec, config: SamplerConfig, tuned: dict[str, Any]) -> Space:
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
        space = default_space(config.method, tuned)
    space.check(config.method)
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
    ess = min(bulk_ess(positions[:, :, j]) for j in range(positions.shape[2]))
    ess = 0.0 if not np.isfinite(ess) else float(ess)
    if objective == "ess-per-second":
        return ess / seconds, {"ess": ess, "seconds": seconds}
    evaluations = max(int(np.sum(result.run.evaluations)), 1)
    return 1000 * ess / evaluations, {"ess": ess, "evaluations": evaluations}


def tune_settings(
    config: SamplerConfig, model, data, tuning, spec: TuneSpec, *, seed: int, say=None, trained=None
) -> TuningResult:
    """Bayesian optimisation of ``config``'s settings on short runs from ``tuning`` (a warm-up).

    Settings the user fixed are not tuned (a space that names one is a
    ConfigError). ``trained``: the autoencoder every trial of a latent
    method shares (:class:`~stanaccel.sampling.engine.Trained`). Returns the
    tuner's result: ``best`` holds the settings to use, ``trials`` the
    history, ``seconds`` the time to charge.
    """
    from stanaccel.sampling.engine import run_sampler

    say = say or (lambda line: None)
    space = checked_space(spec, config, tuning.settings(model.dim))
    trial_seeds = iter(np.random.SeedSequence(seed).generate_state(spec.budget + 1))
    record = spec.objective == "autocorrelation"

    def objective(settings: dict[str, Any], rng: np.random.Generator) -> tuple[float, dict]:
        trial = with_settings(config, {**settings, "chains": spec.chains, "draws": spec.draws})
        start = time.perf_counter()
        result = run_sampler(
            trial, model, data, tuning, seed=int(next(trial_seeds)), charged={}, trained=trained,
            describe=False, record_log_density=record,
        )  # fmt: skip
        value, details = score(result, spec.objective)
        shown = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in settings.items())
        say(f"tuning trial {shown}: {spec.objective} {value:.4g} ({time.perf_counter() - start:.1f} s)")
        return value, details

    say(f"tuning {', '.join(space.names)} of {config.method}: {spec.budget} trials of "
        f"{spec.chains} x {spec.draws} draws, objective {spec.objective}")  # fmt: skip
    return bayesian_optimisation(objective, space, budget=spec.budget, seed=seed)
