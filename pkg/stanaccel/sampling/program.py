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

import time
import warnings
import zlib
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.approx import ApproximationPair, KeepConstants, low_rank
from stanaccel.approx.taylor import (
    Quadratic,
    ScaledSubset,
    check_laplace,
    control_variate_quadratic,
    control_variates,
    laplace,
)
from stanaccel.kernels.ladder import geometric_betas
from stanaccel.observations import BUNDLED, EXAMPLE, Observations, guess
from stanaccel.sampling.config import (
    APPROX_WARMUP,
    Approximation,
    ConfigError,
    SamplerConfig,
    missing_setting,
)
from stanaccel.seeds import spawn_seed
from stanaccel.stan import StanModel, compile_program, read_data
from stanaccel.stan.compiler import program_info, read_program
from stanaccel.stan.data import EXTREME_RANGE, data_digest, extreme_values, nonfinite_values
from stanaccel.stan.errors import StanError
from stanaccel.stan.optimize import Mode, optimize

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


SUBSET_KINDS = ("subset", "control-variate")
"""Approximations on a random subset of the observations (``m`` of them, the program's ``beta`` scaled)."""

AUTOMATIC_KINDS = ("control-variate", "laplace")
"""Approximations built about the posterior mode, once per run (their set-up time charged)."""

GENERAL_KINDS = (*SUBSET_KINDS, "laplace", "program")
"""The approximation kinds that approximate any Stan program; the others belong to one posterior
(``fitc`` and ``sor`` to the bundled gp_ard, ``coarse`` and ``linearized`` to the PDE posterior)."""


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
    def of(cls, program, include_paths=()) -> Program:
        """From a Program, a StanModel, a CompiledProgram, or a ``.stan`` path (its ``#include`` files found
        beside it, then in ``include_paths``, and inlined: :func:`~stanaccel.stan.compiler.read_program`)."""
        if isinstance(program, Program):
            return program
        if isinstance(program, StanModel):
            program = program.program
        if hasattr(program, "code"):
            name = program.name.removesuffix("_model")
            return cls(name, program.code, f"{name}.stan")
        code, name, label = read_program(Path(program), include_paths)
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


def check_temperable(program, method: str, why: str | None = None) -> None:
    """Raise :class:`ProgramConventionError`, showing the change to make, if there is no ``beta``.

    ``why`` says what needs it (default: ``method`` tempers by powers of the likelihood).
    """
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
    why = why or f"method {method!r} tempers {program.name} by powers of its likelihood"
    raise ProgramConventionError(f"{why}, but {problem}. {BETA_CHANGE}")


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


NO_FIXED_PARAM = (
    "stanaccel samples the parameters' posterior and does not offer Stan's fixed_param sampler; to run the "
    "generated quantities from the data alone, use CmdStan's (method=sample algorithm=fixed_param)"
)


def check_parameters(program, dim: int | None = None) -> None:
    """Refuse a program with nothing to sample, before its warm-up (or, without ``dim``, its compilation).

    Parameters
    ----------
    program : Program, StanModel, CompiledProgram or path
        The program (see :meth:`Program.of`).
    dim : int, optional
        Its number of unconstrained parameters on the data: 0 when every
        parameter has a size of 0 there (``vector[N] x`` with ``N = 0``).

    Raises
    ------
    ProgramConventionError
        The program is empty, declares no parameters, or they have no entries with the data.
    """
    program = Program.of(program)
    if not program.code.strip():
        raise ProgramConventionError(
            f"{program.label} is empty: a Stan program declares its data, parameters and model, such as "
            "data { int N; vector[N] y; } parameters { real mu; } model { y ~ normal(mu, 1); }"
        )
    if not program.info["parameters"]:
        raise ProgramConventionError(
            f"{program.label} has no parameters, so there is nothing to sample: {NO_FIXED_PARAM}"
        )
    if dim == 0:
        raise ProgramConventionError(
            f"the parameters of {program.label} have no entries with this data (0 unconstrained values), so "
            f"there is nothing to sample: {NO_FIXED_PARAM}"
        )


def check_program(config: SamplerConfig, program, data: dict[str, Any]) -> None:
    """Everything ``config`` needs of the program and data, checked before it is compiled."""
    program = Program.of(program)
    check_parameters(program)
    needs = set(config.needs)
    approximations = [
        a for a in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])] if a
    ]
    for key in ("approx", "ladder", "latent_program"):
        if key in needs and getattr(config, key) is None:
            raise missing_setting(config.method, key)
    if "beta" in needs:
        check_temperable(program, config.method)
    for a in approximations:
        if a.kind == "subset" and a.scale:
            why = (
                f"approximation {a.label} scales a subset's likelihood by N/m through the data variable "
                f"beta of {program.name}"
            )
            check_temperable(program, config.method, why)
    if "observations" in needs or any(a.kind in SUBSET_KINDS for a in approximations):
        observations = observations_for(config, program, data)
        n = observations.check(data)
        for a in approximations:
            if a.kind in SUBSET_KINDS:
                check_subset_size(a, n, observations)
    for a in approximations:
        if a.kind in ("coarse", "linearized"):
            raise ConfigError(
                f"approximation kind {a.kind!r} is a surrogate of the PDE posterior (stanaccel.pde), not of "
                f"{program.name}; use kind 'control-variate', 'laplace', 'subset' or a program of your own "
                '(program = "approx.stan")'
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
    if approximations and config.warmup_kind == APPROX_WARMUP and approximations[-1].kind in AUTOMATIC_KINDS:
        raise ConfigError(
            f"warmup = {APPROX_WARMUP!r} runs Stan's NUTS warm-up on the cheapest approximation, "
            f"{approximations[-1].label}, which is built in Python about the mode, not a Stan program: "
            "use warmup = 'laplace' (the same mode, no NUTS), or an approximation of kind 'subset' or a "
            'program of your own (program = "approx.stan")'
        )
    latent = getattr(config, "latent_program", None)
    if latent is not None and not Path(latent).is_file():
        raise FileNotFoundError(f"latent program file not found: {latent}")


def check_subset_size(spec: Approximation, n: int, observations: Observations) -> None:
    """Raise :class:`ConfigError` unless a subset approximation's m is below the N observations."""
    if not 1 <= spec.m < n:
        raise ConfigError(
            f"approximation {spec.label}: m must be between 1 and {n - 1}, one less than the number of "
            f"observations ({observations.count} = {n} in the data)"
        )


def check_instance(
    config: SamplerConfig,
    model: StanModel,
    data: dict[str, Any],
    data_label: str = "the data",
    sources: dict[str, str] | str = "settings",
) -> None:
    """What ``config`` needs of the compiled program, checked before the warm-up.

    The data hold no NaN or infinity that leaves the log density undefined; a
    latent method's ``latent_dim`` is below the number of unconstrained
    parameters; a subset of the observations (and a subset approximation's
    ``beta = N/m``) makes a valid instance of the program.

    Raises
    ------
    ValueError
        Non-finite data (naming the variables and ``data_label``).
    ConfigError
        ``latent_dim`` too large, ``m`` not below the number of observations.
    ProgramConventionError
        Parameters with no entries on the data (nothing to sample); a subset
        that Stan refuses: a per-observation field left out of
        ``observations``, or a ``beta`` whose declared bound excludes N/m.
    """
    check_finite_data(model, data, data_label)
    program = Program.of(model)
    check_parameters(program, model.dim)
    if hasattr(config, "latent_dim"):  # a latent method
        if model.dim < 2:
            raise ConfigError(
                f"method {config.method!r} reduces the parameters of {program.name} to a latent space, "
                f"but it has {model.dim} unconstrained parameter; use hmc or nuts"
            )
        latent_dim = getattr(config, "latent_dim", None)
        if latent_dim is not None and latent_dim >= model.dim:
            where = sources if isinstance(sources, str) else sources.get("latent_dim", "settings")
            raise ConfigError(
                f"{where}: latent_dim = {latent_dim}: must be below {model.dim}, the number of unconstrained "
                f"parameters of {program.name}"
            )
    approximations = [
        a for a in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])] if a
    ]
    subsets = [a for a in approximations if a.kind in SUBSET_KINDS]
    if not subsets and "observations" not in config.needs:
        return
    observations = observations_for(config, program, data)
    n = observations.check(data)
    for spec in subsets:
        check_subset_size(spec, n, observations)
    m = min([spec.m for spec in subsets] or [max(1, n // 2)])
    subset = observations.take(data, np.arange(m))
    try:
        model.with_data(subset)
    except StanError as error:
        left_out = [
            k for k, v in data.items() if k not in observations.fields and np.ndim(v) and np.shape(v)[0] == n
        ]
        hint = f"; perhaps add {', '.join(map(repr, left_out))} to its fields" if left_out else ""
        raise ProgramConventionError(
            f"observations = {{ count = {observations.count!r}, fields = {list(observations.fields)!r} }}: "
            f"{program.name} refuses a subset of {m} of its {n} observations ({observations.count} = {m}, "
            f"those fields cut to {m} entries): {error}. Every data variable with one entry per "
            f"observation must be among the fields{hint}"
        ) from None
    if "observations" in config.needs:  # a subsampled ladder
        _check_smallest_level(config, model, program, data, observations, n, sources)
    for spec in subsets:
        if not spec.scale or not has_beta(program):  # control variates without beta: ScaledSubset
            continue
        beta = float(data.get("beta", 1.0)) * n / spec.m
        try:
            model.with_data({**observations.take(data, np.arange(spec.m)), "beta": beta})
        except StanError as error:
            raise ProgramConventionError(
                f"approximation {spec.label} multiplies the subset's likelihood by N/m, so it sets beta = "
                f"{beta:g}, which {program.name} refuses: {error}. Declare beta without an upper bound "
                "(real<lower=0> beta;)"
                + (", or set scale = false in the approximation" if spec.kind == "subset" else "")
            ) from None


def _check_smallest_level(config, model, program, data, observations, n, sources) -> None:
    """The hottest level of a subsampled ladder (about beta_min N observations) is a valid instance.

    A ladder's subsets are nested, so the smallest one is the only one to try.
    A program that declares ``int<lower=1> N`` refuses an empty subset, which
    a small ``beta_min`` gives on few observations.
    """
    betas = geometric_betas(config.levels, config.beta_min) if config.betas is None else config.betas
    key = "beta_min" if config.betas is None else "betas"
    smallest = min(betas)
    size = int(round(smallest * n))
    try:
        model.with_data(observations.take(data, np.arange(size)))
    except StanError as error:
        where = sources if isinstance(sources, str) else sources.get(key, "settings")
        raise ConfigError(
            f"{where}: {key}: the ladder's hottest level (beta = {smallest:.3g}) takes {size} of the {n} "
            f"observations, which {program.name} refuses: {error}. Raise the smallest beta so that it keeps "
            "as many observations as the program needs"
        ) from None


def check_finite_data(model: StanModel, data: dict[str, Any], label: str = "the data") -> None:
    """Raise ValueError naming the values if the data hold NaN, infinity or extreme values that the program
    cannot use.

    Stan would say only that initialization failed. Extreme values are
    finite ones beyond ±1e150 or nonzero within ±1e-150, where a square (of
    the value or its reciprocal) overflows: ``y ~ normal(mu, 1)`` with a
    ``y`` of 1e300 is -inf at every point. Data with such values that the
    program handles (its log density and gradient are finite at the origin
    of the unconstrained space) pass.
    """
    nonfinite, extreme = nonfinite_values(data), extreme_values(data)
    if not nonfinite and not extreme:
        return
    try:
        value, gradient = model.log_density_gradient(np.zeros(model.dim))
    except StanError as error:
        problem = str(error).removeprefix("Exception: ")
    else:
        if np.isfinite(value) and np.all(np.isfinite(gradient)):
            return
        problem = f"the log density is {value}" if not np.isfinite(value) else "its gradient is not finite"
    name = Program.of(model).name
    if nonfinite:
        raise ValueError(
            f"{label}: {'; '.join(nonfinite)}: NaN or infinity in the data, which {name} cannot use "
            f"({problem}); remove those entries or replace them with numbers"
        )
    values = "a value" if len(extreme) == 1 else "values"
    raise ValueError(
        f"{label}: {'; '.join(extreme)}: {values} {EXTREME_RANGE}, where arithmetic overflows (a square is "
        f"infinite), which {name} cannot use ({problem}); correct it, or rescale the data (other units)"
    )


def approximation(
    spec: Approximation, model: StanModel, data: dict[str, Any], config: SamplerConfig, seed: int
):
    """A chain's own log density of the approximation ``spec``, keeping constants (see KeepConstants).

    Its random choices (a subset, inducing inputs) come from a seed spawned
    from ``seed`` and the specification itself, so the same specification
    gives the same approximation in every sampler and chain of a run. The
    automatic kinds (:data:`AUTOMATIC_KINDS`) are built about the mode once
    per program, data, specification and seed (:func:`automatic_setup`) and
    then cost only a chain's own Stan instance of the subset.

    Raises
    ------
    ProgramConventionError
        A program approximation whose parameters differ from the posterior's in names or shapes.
    """
    if hasattr(model, "approximation"):  # a Python target (the PDE posterior) builds its own surrogates
        return model.approximation(spec, spawn_seed(seed, zlib.crc32(spec.label.encode())))
    if spec.kind == "laplace":
        return laplace(automatic_setup(spec, model, data, config, seed).mode)
    if spec.kind == "control-variate":
        setup = automatic_setup(spec, model, data, config, seed)
        return control_variates(scaled_subset(spec, model, data, config, seed), setup.quadratic)
    if spec.kind == "subset":
        return KeepConstants(model.with_data(_subset_data(spec, model, data, config, seed)))
    if spec.kind in ("fitc", "sor"):
        seed = spawn_seed(seed, zlib.crc32(spec.label.encode()))
        return KeepConstants(low_rank(data, spec.m, kind=spec.kind, seed=seed, method=spec.inducing))
    other_data = data if spec.data is None else prepare_data(Program.of(spec.program), spec.data)
    other = StanModel(compile_program(Path(spec.program)), other_data)
    if model.param_unc_names() != other.param_unc_names():
        raise ProgramConventionError(
            f"the approximation {spec.label} has the unconstrained parameters {other.param_unc_names()}, "
            f"but {Program.of(model).name} has {model.param_unc_names()} (sizes set by different data?)"
        )
    return KeepConstants(other)


def warmup_approximation(config: SamplerConfig, model: StanModel, data: dict[str, Any], seed: int):
    """The label and Stan model ``warmup = "nuts-approx"`` warms up on: the cheapest approximation (the last).

    It is the approximation the chains use (same subset, same seed), not a copy.
    """
    spec = approximation_specs(config)[-1]
    return spec.label, approximation(spec, model, data, config, seed).model


def approximation_specs(config: SamplerConfig) -> list[Approximation]:
    """A method's approximations (``approx``, or the ``ladder``) as specifications, the cheapest last."""
    return [config.approx] if "approx" in config.needs else list(config.ladder)


def _subset_data(spec: Approximation, model, data: dict[str, Any], config, seed: int) -> dict[str, Any]:
    """The data of a subset approximation: m observations drawn without replacement, ``beta`` scaled.

    The subset is fixed by a seed spawned from ``seed`` and the
    specification's label: the same in every chain and sampler of a run.
    """
    observations, n, drawn = _subset_indices(spec, model, data, config, seed)
    subset = observations.take(data, np.sort(drawn))
    if spec.scale and has_beta(Program.of(model)):
        subset["beta"] = float(data.get("beta", 1.0)) * n / spec.m
    return subset


def _subset_indices(spec, model, data, config, seed) -> tuple[Observations, int, np.ndarray]:
    """The observations, their number N, and a subset approximation's m indices in the order drawn."""
    seed = spawn_seed(seed, zlib.crc32(spec.label.encode()))
    observations = observations_for(config, model, data)
    n = observations.check(data)
    check_subset_size(spec, n, observations)
    return observations, n, np.random.default_rng(seed).choice(n, size=spec.m, replace=False)


BASE_TRIES = 10
"""The sizes m0 = 0, 1, ... tried for the base of a :class:`ScaledSubset` (a program declaring
``int<lower=2> N`` takes no fewer than 2 observations)."""


def scaled_subset(spec: Approximation, model: StanModel, data: dict[str, Any], config, seed: int):
    """The subset of a control-variate approximation, its likelihood scaled up to the N observations.

    With the program's ``beta`` = N/m where it declares one (a
    :class:`KeepConstants`); else a :class:`~stanaccel.approx.taylor.ScaledSubset`
    of the program on the subset and on its first m0 observations drawn,
    m0 the fewest the program takes.

    Raises
    ------
    ProgramConventionError
        No ``beta``, and the program refuses every subset of fewer than
        :data:`BASE_TRIES` observations.
    """
    subset = KeepConstants(model.with_data(_subset_data(spec, model, data, config, seed)))
    if has_beta(Program.of(model)):
        return subset
    observations, n, drawn = _subset_indices(spec, model, data, config, seed)
    refusals = []
    for m0 in range(min(BASE_TRIES, spec.m)):
        try:
            base = KeepConstants(model.with_data(observations.take(data, np.sort(drawn[:m0]))))
        except StanError as error:
            refusals.append(str(error).splitlines()[0])
            continue
        return ScaledSubset(subset, base, (n - m0) / (spec.m - m0))
    raise ProgramConventionError(
        f"approximation {spec.label}: {Program.of(model).name} has no data variable beta to scale a subset's "
        f"likelihood by N/m, so stanaccel scales the difference between it on {spec.m} observations and on "
        f"fewer; but it refuses every subset of fewer than {min(BASE_TRIES, spec.m)} ({refusals[-1]}). "
        f"{BETA_CHANGE}"
    )


@dataclass
class AutomaticSetup:
    """What an automatic approximation computes once: the mode, and the control variates' quadratic.

    Attributes
    ----------
    mode : Mode
        The posterior mode and the Hessian there (:func:`posterior_mode`).
    mode_seconds : float
        The time the mode and its Hessian took (shared by every automatic
        approximation of one posterior, and charged once).
    quadratic : Quadratic or None
        kind "control-variate": the Taylor expansion of log pi - log subset about the mode.
    seconds : float
        The time the quadratic took (the subset's Hessian and the Taylor coefficients).
    """

    mode: Mode
    mode_seconds: float
    quadratic: Quadratic | None = None
    seconds: float = 0.0


MODE_TOL_REL_GRAD = 1e3
"""Stan L-BFGS's relative gradient tolerance (in units of machine epsilon) for the approximations' mode:
tighter than CmdStan's 1e7, so that the mode is found to well within 1e-3 posterior sds (Newton decrement)."""
KEPT = 16
"""How many modes and set-ups a process keeps (the latest)."""
_MODES: OrderedDict[tuple, tuple[Mode, float]] = OrderedDict()
_SETUPS: OrderedDict[tuple, AutomaticSetup] = OrderedDict()


def _remember(cache: OrderedDict, key: tuple, value):
    cache[key] = value
    while len(cache) > KEPT:
        cache.popitem(last=False)
    return value


def posterior_mode(model: StanModel, data: dict[str, Any], say=None) -> tuple[Mode, float]:
    """The mode of the posterior of ``model`` on ``data`` and its Hessian, and the seconds they took.

    Found once per process for a program and data by Stan's L-BFGS
    (:func:`stanaccel.stan.optimize.optimize`, with the Jacobian: the mode
    of the density the samplers move on, in unconstrained space), from the
    origin of the unconstrained space, and shared by every automatic
    approximation of that posterior. Its log density keeps the constants
    (as :class:`~stanaccel.approx.KeepConstants` does), so that pi* is on
    pi's scale.
    """
    say = say or (lambda line: None)
    key = (str(getattr(model.program, "library", model.name)), data_digest(data))
    if key in _MODES:
        _MODES.move_to_end(key)
        return _MODES[key]
    start = time.perf_counter()
    density = KeepConstants(model.with_data(data))
    mode = optimize(density.model, jacobian=True, init_radius=0.0, tol_rel_grad=MODE_TOL_REL_GRAD)
    mode = replace(mode, log_density=density.log_density(mode.point))
    seconds = time.perf_counter() - start
    say(
        f"posterior mode by L-BFGS (Stan's) in {mode.iterations} iterations, Hessian by finite "
        f"differences of gradients: {seconds:.2g} s (charged)"
    )
    decrement = mode.newton_decrement()  # NaN where -H is not positive definite (Laplace refuses that)
    if decrement > 1e-3:
        warnings.warn(
            f"the search for the posterior mode did not converge (Newton decrement {decrement:.2g}; "
            f"{mode.messages[-1] if mode.messages else 'no message'}), so the approximations are built "
            "about the best point found",
            ApproximationWarning,
            stacklevel=2,
        )
    return _remember(_MODES, key, (mode, seconds))


def automatic_setup(
    spec: Approximation,
    model: StanModel,
    data: dict[str, Any],
    config: SamplerConfig,
    seed: int,
    say=None,
) -> AutomaticSetup:
    """The mode (and a control-variate approximation's quadratic) of ``spec``, built once per process.

    :func:`~stanaccel.sampling.engine.sample` builds it before the warm-up,
    so that a Laplace approximation at a singular Hessian is refused before
    anything else runs; every chain's :func:`approximation` then reuses it.
    A process that has not built it (an executor's worker) builds it again,
    to the same numbers: the search is deterministic.

    Raises
    ------
    ConfigError
        kind "laplace" where the Hessian at the mode is singular or indefinite.
    """
    say = say or (lambda line: None)
    mode, mode_seconds = posterior_mode(model, data, say)
    if spec.kind == "laplace":
        problem = check_laplace(mode)
        if problem is not None:
            raise ConfigError(f"approximation {spec.label} of {Program.of(model).name}: {problem}")
        return AutomaticSetup(mode, mode_seconds)
    key = (str(getattr(model.program, "library", model.name)), data_digest(data), spec.label, seed)
    if key in _SETUPS:
        _SETUPS.move_to_end(key)
        return _SETUPS[key]
    start = time.perf_counter()
    quadratic = control_variate_quadratic(scaled_subset(spec, model, data, config, seed), mode)
    seconds = time.perf_counter() - start
    say(f"approximation {spec.label}: Taylor control variates about the mode, {seconds:.2g} s (charged)")
    return _remember(_SETUPS, key, AutomaticSetup(mode, mode_seconds, quadratic, seconds))


def prepare_approximations(
    config: SamplerConfig, model, data: dict[str, Any], seed: int, say=None
) -> dict[str, float]:
    """Build what ``config``'s approximations compute once; the seconds each took, by label.

    For a Stan program, the automatic approximations' mode (once, as
    ``"mode"``) and Taylor coefficients (:func:`automatic_setup`); for a
    Python target, its surrogates (their ``approximation_seconds``). Cached:
    a second call costs nothing and reports the same seconds, which every
    run that uses them is charged.
    """
    specs = [a for a in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])] if a]
    if hasattr(model, "approximation"):
        for spec in specs:
            approximation(spec, model, data, config, seed)
        return {a.label: model.approximation_seconds.get(a.label, 0.0) for a in specs}
    setups = {
        a.label: automatic_setup(a, model, data, config, seed, say)
        for a in specs
        if a.kind in AUTOMATIC_KINDS
    }
    if not setups:
        return {}
    return {"mode": next(iter(setups.values())).mode_seconds} | {k: s.seconds for k, s in setups.items()}


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
            "use a closer approximation (kind control-variate for a subset, a larger m, the PDE error model)",
            ApproximationWarning,
            stacklevel=2,
        )
    return report
