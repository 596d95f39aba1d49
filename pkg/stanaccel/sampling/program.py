"""What a sampler needs of the user's Stan program, checked before any sampling.

Three conventions (the README shows a complete program for each):

- **Tempering by powers** (``pt``, ``tt``; also subset approximations scaled
  to the full data's weight) needs a data variable ``real<lower=0> beta``
  that multiplies the log likelihood: ``target += beta *
  normal_lpdf(y | mu, sigma);`` instead of ``y ~ normal(mu, sigma);``.
  stanaccel sets ``beta = 1`` for the posterior and ``beta = 0`` for the
  prior, so a data file needs no ``beta``.
- **Subsampling** (``spt``, ``stt``, subset approximations) needs the
  observations declared: :class:`stanaccel.observations.Observations`.
- **An approximation** pi* is any second Stan program (or the same program
  on other data) with the same parameters; :func:`approximation` checks
  their names and shapes, and :func:`describe_approximation` measures the
  cost ratio and the spread of log pi - log pi* over warm-up draws, warning
  when it is too large for the exact samplers to mix.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.approx import ApproximationPair, KeepConstants, low_rank
from stanaccel.observations import BUNDLED, EXAMPLE, Observations, guess
from stanaccel.sampling.config import Approximation, ConfigError, SamplerConfig
from stanaccel.seeds import spawn_seed
from stanaccel.stan import StanModel, compile_program, read_data
from stanaccel.stan.compiler import program_info, read_program

BETA_CHANGE = """\
Declare it with the data and multiply the log likelihood by it:

  data {
    ...
    real<lower=0> beta;
  }
  model {
    ...                                    // priors as before
    target += beta * normal_lpdf(y | mu, sigma);   // was: y ~ normal(mu, sigma);
  }

stanaccel sets beta = 1 for the posterior and beta = 0 for the prior (the data file needs no beta)."""

SPREAD_LIMIT = 2.0
"""The sd of log pi - log pi* above which :func:`describe_approximation` warns. Two independent
draws then differ in log ratio by about N(0, 2 sd^2), and a mark move of the discretizing chain
is accepted with probability about 2 Phi(-sd / sqrt 2): 0.16 at sd = 2, 0.03 at sd = 3."""


class ProgramConventionError(ValueError):
    """The program lacks what a method needs (``beta``, declared observations, matching parameters)."""


class ApproximationWarning(UserWarning):
    """An approximation differs from the posterior by too much for the exact samplers to mix."""


@dataclass(frozen=True)
class Program:
    """A program's text and name, before it is compiled (the checks here need only ``stanc --info``)."""

    name: str
    code: str
    label: str = "program.stan"
    """The program's file name, as messages name it."""

    @classmethod
    def of(cls, program) -> Program:
        """From a Program, a StanModel, a CompiledProgram, or a ``.stan`` path."""
        if isinstance(program, Program):
            return program
        if isinstance(program, StanModel):
            program = program.program
        if hasattr(program, "code"):
            name = program.name.removesuffix("_model")
            return cls(name, program.code, f"{name}.stan")
        code, name, label = read_program(Path(program))
        return cls(name.removesuffix("_model"), code, label)

    @property
    def info(self) -> dict:
        return program_info(self.code, self.label)


def inputs(program) -> dict[str, dict]:
    """The data declarations (``stanc --info``) of a program (see :meth:`Program.of`)."""
    return Program.of(program).info["inputs"]


def has_beta(program) -> bool:
    """Whether the program declares a real scalar ``beta`` among its data."""
    beta = inputs(program).get("beta")
    return beta is not None and beta["type"] == "real" and beta["dimensions"] == 0


def prepare_data(program, data: Any) -> dict[str, Any]:
    """The data as a dict, with ``beta = 1`` added when the program declares it and the data lack it."""
    if data is None:
        data = {}
    elif isinstance(data, str | Path):
        data = read_data(data)
    data = dict(data)
    if "beta" not in data and has_beta(program):
        data["beta"] = 1.0
    return data


def check_temperable(program, method: str) -> None:
    """Raise :class:`ProgramConventionError`, showing the change to make, if there is no ``beta``."""
    program = Program.of(program)
    if has_beta(program):
        return
    declared = inputs(program).get("beta")
    problem = (
        f"its data variable beta is declared as {declared['type']} with {declared['dimensions']} dimensions, "
        "not a real scalar"
        if declared
        else "it has no data variable beta"
    )
    raise ProgramConventionError(
        f"method {method!r} tempers {program.name} by powers of its likelihood, but {problem}. {BETA_CHANGE}"
    )


def check_beta_used(model: StanModel, data: dict[str, Any], point: np.ndarray) -> None:
    """Raise if ``beta`` is declared but the log density does not change with it at ``point``."""
    full = model.with_data({**data, "beta": 1.0}).log_density(point)
    prior = model.with_data({**data, "beta": 0.0}).log_density(point)
    if full == prior:
        raise ProgramConventionError(
            f"{Program.of(model).name} declares beta, but its log density is the same with beta = 1 and "
            "beta = 0: "
            f"beta must multiply the log likelihood. {BETA_CHANGE}"
        )


def observations_for(config: SamplerConfig, program, data: dict[str, Any]) -> Observations:
    """The declared observations (else the bundled program's), checked against ``data``."""
    program = Program.of(program)
    declared = getattr(config, "observations", None)
    if declared is None:
        declared = BUNDLED.get(program.name)
    if declared is None:
        suggestion = guess(data)
        raise ProgramConventionError(
            f"method {config.method!r} subsamples the data of {program.name}, so it must know which data are "
            "per observation: set the setting observations, "
            + (f"for these data perhaps {suggestion}" if suggestion else f"such as {EXAMPLE}")
        )
    try:
        declared.check(data)
    except ValueError as error:
        raise ProgramConventionError(str(error)) from None
    return declared


def check_program(config: SamplerConfig, program, data: dict[str, Any]) -> None:
    """Everything ``config`` needs of the program and data, checked before it is compiled."""
    program = Program.of(program)
    needs = set(config.needs)
    approximations = [
        a for a in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])] if a
    ]
    for key in ("approx", "ladder", "latent_program"):
        if key in needs and getattr(config, key) is None:
            raise ConfigError(f"method {config.method!r} needs the setting {key!r}")
    if "beta" in needs or any(a.kind == "subset" and a.scale for a in approximations):
        check_temperable(program, config.method)
    if "observations" in needs or any(a.kind == "subset" for a in approximations):
        observations_for(config, program, data)
    for a in approximations:
        if a.kind in ("coarse", "linearized"):
            raise ConfigError(
                f"approximation kind {a.kind!r} is a surrogate of the PDE posterior (stanaccel.pde), not of "
                f"{program.name}; use kind 'subset' or a program of your own (program = \"approx.stan\")"
            )
        if a.kind in ("fitc", "sor") and program.name != "gp_ard":
            raise ConfigError(
                f"approximation kind {a.kind!r} is the bundled low-rank approximation of gp_ard, not of "
                f"{program.name}; use kind 'subset' or a program of your own (program = \"approx.stan\")"
            )
        if a.kind == "program":
            for path in (a.program, a.data):
                if path is not None and not Path(path).is_file():
                    raise FileNotFoundError(f"approximation file not found: {path}")
            check_same_parameters(program, Program.of(a.program), a.label)
    latent = getattr(config, "latent_program", None)
    if latent is not None and not Path(latent).is_file():
        raise FileNotFoundError(f"latent program file not found: {latent}")


def approximation(
    spec: Approximation, model: StanModel, data: dict[str, Any], config: SamplerConfig, seed: int
) -> KeepConstants:
    """A chain's own Stan instance of the approximation ``spec``, keeping constants (see KeepConstants).

    Its random choices (a subset, inducing inputs) come from a seed spawned
    from ``seed`` and the specification itself, so the same specification
    gives the same approximation in every sampler and chain of a run.

    Raises
    ------
    ProgramConventionError
        A program approximation whose parameters differ from the posterior's in names or shapes.
    """
    seed = spawn_seed(seed, zlib.crc32(spec.label.encode()))
    if hasattr(model, "approximation"):  # a Python target (the PDE posterior) builds its own surrogates
        return model.approximation(spec, seed)
    if spec.kind == "subset":
        observations = observations_for(config, model, data)
        n = observations.check(data)
        if not 1 <= spec.m < n:
            raise ConfigError(
                f"approximation {spec.label}: m must be between 1 and {n - 1} ({observations.count})"
            )
        indices = np.sort(np.random.default_rng(seed).choice(n, size=spec.m, replace=False))
        subset = observations.take(data, indices)
        if spec.scale:
            subset["beta"] = float(data.get("beta", 1.0)) * n / spec.m
        return KeepConstants(model.with_data(subset))
    if spec.kind in ("fitc", "sor"):
        return KeepConstants(low_rank(data, spec.m, kind=spec.kind, seed=seed, method=spec.inducing))
    other_data = data if spec.data is None else prepare_data(Program.of(spec.program), spec.data)
    other = StanModel(compile_program(Path(spec.program)), other_data)
    if model.param_unc_names() != other.param_unc_names():
        raise ProgramConventionError(
            f"the approximation {spec.label} has the unconstrained parameters {other.param_unc_names()}, "
            f"but {Program.of(model).name} has {model.param_unc_names()} (sizes set by different data?)"
        )
    return KeepConstants(other)


def check_same_parameters(program: Program, other: Program, label: str) -> None:
    """Raise unless ``other`` declares the parameters of ``program`` (names, types, dimensions)."""
    mine, theirs = program.info["parameters"], other.info["parameters"]
    if mine != theirs:
        raise ProgramConventionError(
            f"the approximation {label} must declare the parameters of {program.name} with the same names "
            f"and shapes: {program.name} has {_describe(mine)}; the approximation has {_describe(theirs)}"
        )


def _describe(parameters: dict) -> str:
    def shape(v: dict) -> str:
        return v["type"] + (f" with {v['dimensions']} dimensions" if v["dimensions"] else "")

    return ", ".join(f"{k} ({shape(v)})" for k, v in parameters.items()) or "none"


def describe_approximation(exact, approx, points: np.ndarray, label: str) -> dict[str, float]:
    """pi*'s cost relative to pi and the spread of log pi - log pi* over ``points``; warns if too wide."""
    pair = ApproximationPair(exact, approx)
    report = {"approximation": label, **pair.cost(points[:5]), **pair.discrepancy(points)}
    if report["log_ratio_sd"] > SPREAD_LIMIT:
        warnings.warn(
            f"approximation {label}: log pi - log pi* has sd {report['log_ratio_sd']:.2g} over posterior "
            f"draws (above {SPREAD_LIMIT:g}), so the exact samplers will accept few moves and mix slowly; "
            "use a closer approximation (a larger subset, more inducing points, the PDE error model)",
            ApproximationWarning,
            stacklevel=2,
        )
    return report
