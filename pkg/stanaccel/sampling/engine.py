"""``sample``: any stanaccel sampler on any Stan program, from Stan's NUTS warm-up to the draws.

One run, as ``stanaccel sample`` and the ``sample`` workflow step make it:

1. check the settings (:func:`~stanaccel.sampling.config.make_config`) and
   what the method needs of the program (:mod:`stanaccel.sampling.program`),
   before anything is compiled or run where possible;
2. run Stan's NUTS warm-up (or take an earlier one: a ``WarmupState``, a
   netCDF file written by stanaccel, or CmdStan CSV files);
3. tune the kernel from it: step size, metric, MH scale, start points; train
   the autoencoder for the latent methods; tune latent and pCN steps;
4. run the chains, and return a :class:`SampleResult`, whose time charges
   the warm-up, pilot, training and tuning;
5. write every quantity of the program at each kept draw: parameters,
   transformed parameters and generated quantities, ``log_lik`` as the
   ``log_likelihood`` group (:mod:`stanaccel.stan.quantities`; Stan's NUTS
   writes them itself). For the other methods this runs after the chains
   end, outside the sampling's wall time and ESS per second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stanaccel.approx import KeepConstants
from stanaccel.densities import evaluations
from stanaccel.diagnostics.files import jsonable
from stanaccel.executors import Executor, SerialExecutor, check_reachable, executor_from
from stanaccel.extras import require_latent
from stanaccel.kernels import KernelRun, run_chains
from stanaccel.kernels.driver import quantity_fields
from stanaccel.programs import program_path
from stanaccel.results import Result
from stanaccel.sampling.build import KernelFactory, Tuning, no_laplace
from stanaccel.sampling.config import ConfigError, SamplerConfig, make_config
from stanaccel.sampling.methods import StepTuning, method_spec
from stanaccel.sampling.program import (
    Program,
    check_beta_used,
    check_instance,
    check_program,
    describe_approximation,
    prepare_data,
)
from stanaccel.sampling.tasks import run_chains_on
from stanaccel.seeds import check_seed, spawn_seeds
from stanaccel.stan import CompiledProgram, StanModel, compile_program
from stanaccel.stan.nuts import NutsFit, WarmupState, sample_nuts
from stanaccel.stan.quantities import stan_quantities

if TYPE_CHECKING:  # stanaccel.sampling.tune imports stanaccel.tuning, which imports this package's config
    from stanaccel.sampling.tune import TuneSpec

SEEDS = ("nuts", "chains", "tuning", "autoencoder", "subsets", "pilot", "optimisation", "quantities")


def warmup_share(fit: NutsFit) -> float:
    """The warm-up's share of a NUTS run's time, estimated by its share of the gradient evaluations."""
    return float(fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1))


def method_label(config: SamplerConfig) -> str:
    """A short name of the sampler for tables and messages, such as "TT (HMC)" or "AE-pCN (exact)"."""
    return method_spec(config.method).label_of(config)


@dataclass
class SampleResult(Result):
    """The outcome of :func:`sample`: draws, the settings used, and the time charged to them.

    Attributes
    ----------
    config : SamplerConfig
        The settings used, every tuned value filled in.
    sources : dict
        Per setting, where its value came from: "user", "tuned" or "default".
    run : NutsFit or KernelRun
        The sampling run.
    program : str
        The program's name.
    seed : int
    charged_seconds : dict
        Time spent before sampling and charged to it: "warmup" (or "warmup (borrowed)": an
        earlier run's, by ``warmup_from``), "pilot", "training", "tuning".
    reports : dict
        Method-specific records: "approximations" (cost and spread), "autoencoder"
        (training and reconstruction), "summaries" (each chain's kernel summary),
        "density_costs" (per chain, the evaluations and seconds of the exact density
        and of each approximation). Plain values only, so that a result pickles.
    """

    config: SamplerConfig
    sources: dict[str, str]
    run: NutsFit | KernelRun
    program: str
    seed: int
    charged_seconds: dict[str, float] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)
    adaptation: WarmupState | None = None
    """The NUTS warm-up's adaptation (a method other than NUTS): saved in the file's ``adaptation``
    group with each chain's last draw, so that ``--warmup-from`` can continue from the file."""

    @property
    def method(self) -> str:
        return self.config.method

    @property
    def exact(self) -> bool:
        return self.config.is_exact

    @property
    def interrupted(self) -> bool:
        return bool(self.run.interrupted)

    @property
    def evaluations(self) -> int:
        """Density and gradient evaluations of the sampling run (NUTS: gradients, warm-up included)."""
        if isinstance(self.run, NutsFit):
            return int(self.run.gradient_evaluations)
        return int(np.sum(self.run.evaluations))

    @property
    def acceptance(self) -> float:
        """The mean acceptance probability of the kept draws' steps."""
        run = self.run
        values = (
            run.sample_stats["acceptance_rate"] if isinstance(run, NutsFit) else run.acceptance_probability
        )
        return float(np.mean(values)) if np.size(values) else float("nan")

    @property
    def num_draws(self) -> int:
        """Draws per chain kept (fewer than asked for after Ctrl-C)."""
        run = self.run
        return run.num_draws if isinstance(run, NutsFit) else run.positions.shape[1]

    @property
    def iterations(self) -> int:
        """Iterations of all chains (NUTS and latent NUTS: warm-up included, as their evaluations are)."""
        run = self.run
        if isinstance(run, NutsFit):
            return run.chains * (run.warmup_unconstrained.shape[1] + run.num_draws)
        return self.reports.get("iterations", int(np.prod(run.positions.shape[:2])))

    @property
    def quantities_failed(self) -> int:
        """Kept draws whose generated quantities failed (a ``reject``): NaN in the posterior, not a crash."""
        failed = self.run.quantities_failed
        return 0 if failed is None else int(np.sum(failed))

    @property
    def sampling_seconds(self) -> float:
        """The sampling run's time; for Stan NUTS without its warm-up's share."""
        if isinstance(self.run, NutsFit):  # Stan's NUTS, its warm-up in the run
            return self.run.wall_seconds * (1 - warmup_share(self.run))
        return self.run.wall_seconds

    @property
    def wall_seconds(self) -> float:
        """The time of the whole run: sampling plus everything charged to it."""
        return self.run.wall_seconds + sum(self.charged_seconds.values())

    def inference_groups(self) -> dict[str, Any]:
        groups = self.run.inference_groups()
        if self.adaptation is not None and not isinstance(self.run, NutsFit):
            groups["adaptation"] = self._adaptation_group()
            groups["attrs"] = {**groups.get("attrs", {}), "metric": self.adaptation.metric, "adapted": True}
        groups["attrs"] = {
            **groups.get("attrs", {}),
            "method": self.method,
            "sampler": method_label(self.config),
            "exact": self.exact,
            "invariance": "exact" if self.exact else "approximate: does not leave the posterior invariant",
            "program": self.program,
            "seed": self.seed,
            "settings": json.dumps(jsonable(self.config.as_dict())),
            "setting_sources": json.dumps(self.sources),
            "charged_seconds": json.dumps(self.charged_seconds),
            "wall_seconds": self.wall_seconds,
        }
        return groups

    def _adaptation_group(self) -> dict[str, np.ndarray]:
        """Per chain: the warm-up's step size and inverse metric (of the warm-up chain it started
        from) and the chain's last draw (its start point where it has none)."""
        state, positions = self.adaptation, np.asarray(self.run.positions)
        source = np.arange(len(positions)) % len(state.step_size)
        last = positions[:, -1, :] if positions.shape[1] else np.asarray(state.positions)[source]
        return {
            "step_size": np.asarray(state.step_size)[source],
            "inv_metric": np.asarray(state.inv_metric)[source],
            "last_position": last,
        }

    def _metrics_arguments(self) -> dict[str, Any]:
        return {
            "wall_seconds": self.wall_seconds,
            "sampling_seconds": self.sampling_seconds,
            "gradient_evaluations": self.evaluations,
        }

    def metrics(self) -> dict[str, Any]:
        """ESS (bulk, tail), R-hat, wall time, evaluations, ESS per second with and without the charges.

        Also ``method_statistics``, each chain's kernel statistics (swap
        acceptance and round trips, trajectory acceptance, mark acceptance and
        cache hits: :func:`~stanaccel.diagnostics.method_statistics`), and
        ``converged`` and ``warnings``, which include the method's
        (:func:`~stanaccel.diagnostics.metrics.judge`).
        """
        from stanaccel.diagnostics.metrics import judge, method_statistics

        metrics = super().metrics()
        metrics["evaluations"] = metrics.pop("gradient_evaluations")
        metrics["ess_per_1000_evaluations"] = metrics.pop("ess_per_1000_gradients")
        metrics["method_statistics"] = method_statistics(self.reports.get("summaries", []))
        judge(metrics)
        return {
            "method": self.method,
            "sampler": method_label(self.config),
            "exact": self.exact,
            "program": self.program,
            "seed": self.seed,
            "converged": metrics["converged"],  # first, so that a reader of metrics.json sees it
            "warnings": metrics["warnings"],
            **metrics,
            "charged_seconds": dict(self.charged_seconds),
            "acceptance": self.acceptance,
            "quantities_failed": self.quantities_failed,
            "interrupted": self.interrupted,
            "settings": jsonable(self.config.as_dict()),
            "setting_sources": dict(self.sources),
            **(
                {"tuning": jsonable(self.reports["tuning_summary"])}
                if "tuning_summary" in self.reports
                else {}
            ),
        }


def _program_file(program: str | Path | CompiledProgram | StanModel):
    """A ``.stan`` path for a bundled program's name; anything else as it is."""
    if isinstance(program, StanModel | CompiledProgram):
        return program
    path = Path(program)
    return path if path.suffix == ".stan" or path.exists() else program_path(str(program))


def load_program(program: str | Path | CompiledProgram | StanModel) -> CompiledProgram:
    """The compiled program of a ``.stan`` path, a bundled name, a CompiledProgram or a StanModel."""
    program = _program_file(program)
    if isinstance(program, StanModel):
        return program.program
    if isinstance(program, CompiledProgram):
        return program
    return compile_program(Path(program))


def sample(
    program: str | Path | CompiledProgram | StanModel,
    data: dict[str, Any] | str | Path | None = None,
    method: str = "nuts",
    settings: dict[str, Any] | None = None,
    *,
    seed: int = 1,
    warmup_from: WarmupState | str | Path | list | None = None,
    progress: bool = True,
    sources: dict[str, str] | str = "settings",
    log: Callable[[str], None] | None = None,
    checkpoint: str | Path | None = None,
    executor: Executor | str | None = None,
    tune: TuneSpec | dict | bool | None = None,
) -> SampleResult:
    """Sample a Stan program's posterior with any stanaccel method.

    Parameters
    ----------
    program : path, name, CompiledProgram or StanModel
        A ``.stan`` file, a bundled program's name, or a compiled program.
    data : dict, path or None
        The Stan data (a dict or a Stan JSON file). A program that declares
        ``beta`` gets ``beta = 1`` unless the data set it.
    method : str
        One of ``stanaccel.sampling.METHODS``.
    settings : dict
        The method's settings (``stanaccel.sampling.keys(method)``); a value
        set here wins over one tuned from the warm-up, which wins over the default.
    seed : int
        Every random choice of the run derives from it (``numpy.random.SeedSequence``).
    warmup_from : WarmupState, netCDF path, CmdStan CSV path(s), optional
        Use an earlier warm-up instead of running one.
    sources : dict or str
        Where the settings came from, for error messages.
    log : callable, optional
        Receives progress lines (``print`` on the command line).
    checkpoint : path, optional
        A folder for checkpoints (NUTS warm-up and draws in ``nuts/``, a
        pilot in ``pilot/``, kernel chains in ``chains/``): the same call
        after a Ctrl-C or a kill resumes from them to the same draws (see
        :func:`~stanaccel.kernels.run_chains`, :func:`~stanaccel.stan.sample_nuts`).
        The autoencoder of a latent method is trained again; its chains resume
        exactly only if that training is reproducible.
    executor : Executor or str, optional
        Where the chains run (:func:`stanaccel.executors.executor_from`: an
        Executor, or a text such as ``"dask:local:2"``; a text's executor is
        closed at the end); default: in this process. See :func:`run_sampler`.
    tune : TuneSpec, dict or bool, optional
        Tune the method's settings by Bayesian optimisation on short runs
        after the warm-up (``True``: :class:`~stanaccel.sampling.tune.TuneSpec`'s
        defaults; a dict: its options); the trials' time is charged as
        "tuning", and ``reports["tuning"]`` holds every trial. Settings given
        in ``settings`` are kept, not tuned.

    Raises
    ------
    TypeError
        ``settings`` is not a dict.
    MissingExtraError
        A latent method without TensorFlow and Keras (``pip install "stanaccel[latent]"``).
    ConfigError
        A setting is unknown, of the wrong kind or out of range (NaN,
        infinite, above 1e6); a subset's ``m`` or ``latent_dim`` too large;
        ``h-pcn`` on a Stan program.
    ProgramConventionError
        The method needs something the program lacks (``beta``, observations,
        an approximation with the same parameters), or Stan refuses a subset
        of the observations (a field left out, a ``beta`` bounded below N/m).
    ValueError
        A negative seed, a malformed data file, NaN or infinity in the data
        that the program cannot use, a Dask scheduler that does not answer.
        All of these are raised before the warm-up.
    KeyboardInterrupt
        Ctrl-C during the warm-up (there are no draws to keep yet); during
        sampling the result keeps the draws made so far (``interrupted``).
    """
    from stanaccel.sampling.tune import checked_space, tune_spec

    say = log or (lambda line: None)
    config = make_config(method, settings, sources)
    spec = method_spec(config.method)
    if spec.latent:
        require_latent(f"method {method!r}")  # pip install "stanaccel[latent]", before the warm-up
    check_seed(seed, "seed")
    tune = tune_spec(tune)
    if tune is not None and spec.stan_nuts:
        raise ConfigError("Stan's NUTS adapts itself: --tune is for the other methods")
    if tune is not None:
        checked_space(tune, config, {})  # mistakes found before the warm-up, not after
    if isinstance(executor, str):
        check_reachable(executor)  # a mistake found before the warm-up, not after
    if is_target(program):
        return _sample_target(config, program, seed, warmup_from, progress, say, checkpoint, executor, tune)
    if spec.uses_laplace(config):
        raise no_laplace(method)
    if isinstance(program, StanModel) and data is None:
        data = json.loads(program.data_json)
    data_label = f"data file {data}" if isinstance(data, str | Path) else "the data"
    source = Program.of(_program_file(program))
    data = prepare_data(source, data)
    check_program(config, source, data)
    model = StanModel(load_program(program), data)
    check_instance(config, model, data, data_label, sources)  # before the warm-up, not after
    name = source.name
    seeds = spawn_seeds(seed, SEEDS)
    if spec.stan_nuts:
        return _nuts(config, model, name, seed, seeds, warmup_from, progress, say, checkpoint)

    charged: dict[str, float] = {}
    tuning = warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint)
    if warmup_from is not None and "chains" not in config.user_keys():
        config = config.replace(chains=len(tuning.starts))  # one chain per warm-up chain
    if "beta" in config.needs:
        check_beta_used(model, data, tuning.starts[0])
    result = _run_tuned(
        config, model, data, tuning, seed, seeds, charged, say, progress, checkpoint, executor, tune
    )
    result.adaptation = tuning.adaptation  # its file can be a later run's warm-up source
    return result


def _run_tuned(config, model, data, tuning, seed, seeds, charged, say, progress, checkpoint, executor, tune):
    """``run_sampler``, after tuning the settings by Bayesian optimisation if ``tune`` says so."""
    from stanaccel.sampling.tune import tune_settings, with_settings

    found = trained = None
    if tune is not None:
        if method_spec(config.method).latent:  # one autoencoder for every trial and the run
            resolved, _ = config.resolve(tuning.settings(model.dim))
            trained = train(resolved, tuning, seeds["autoencoder"], say)
        found = tune_settings(
            config, model, data, tuning, tune, seed=seeds["optimisation"], say=say, trained=trained
        )
        charged = {**charged, "tuning": charged.get("tuning", 0.0) + found.seconds}
        shown = ", ".join(
            f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in found.best.items()
        )
        kept = found.summary["kept_default"]
        say(f"tuned by Bayesian optimisation: {shown}{', the default' if kept else ''} "
            f"({found.seconds:.1f} s charged)")  # fmt: skip
        if not kept:
            config = with_settings(config, found.best)
    with _executor(executor) as chosen:
        result = run_sampler(
            config, model, data, tuning, seed=seed, seeds=seeds, charged=charged, trained=trained, say=say,
            progress=progress, checkpoint=checkpoint, executor=chosen,
        )  # fmt: skip
    if found is not None:
        if not found.summary["kept_default"]:
            result.sources.update({key: "bayesian optimisation" for key in found.best})
        result.reports["tuning"] = found.table()
        result.reports["tuning_summary"] = found.summary
    return result


def is_target(program) -> bool:
    """Whether ``program`` is a Python target (a PDETarget: its own warm-up), not a Stan program."""
    return hasattr(program, "warm_up") and hasattr(program, "with_data")


def _sample_target(
    config, target, seed, warmup_from, progress, say, checkpoint, executor, tune
) -> SampleResult:
    """``sample`` on a Python target: its own warm-up (the PDE posterior's Laplace approximation)."""
    if warmup_from is not None:
        raise ValueError(f"{target.name} makes its own warm-up; warmup_from is for Stan programs")
    target.check(config)
    seeds = spawn_seeds(seed, SEEDS)
    tuning = target.warm_up(config.chains, config.warmup, seeds["nuts"], say)
    charged = {"warmup": tuning.seconds} if tuning.seconds else {}
    return _run_tuned(
        config, target, {}, tuning, seed, seeds, charged, say, progress, checkpoint, executor, tune
    )


@contextmanager
def _executor(spec: Executor | str | None):
    """The executor ``spec`` names, closed on leaving if it was made here (not a caller's own)."""
    if spec is None or isinstance(spec, Executor):
        yield spec
        return
    with executor_from(spec) as made:
        yield made


@dataclass
class Trained:
    """An autoencoder trained once and shared by several latent samplers (a study's)."""

    maps: Any
    seconds: float
    report: dict[str, Any]
    autoencoder: Any = None


def run_sampler(
    config: SamplerConfig,
    model: StanModel,
    data: dict[str, Any],
    tuning: Tuning,
    *,
    seed: int,
    seeds: dict[str, int] | None = None,
    charged: dict[str, float] | None = None,
    trained: Trained | None = None,
    describe: bool = True,
    say: Callable[[str], None] | None = None,
    progress: bool = False,
    checkpoint: str | Path | None = None,
    executor: Executor | None = None,
    record_log_density: bool = False,
) -> SampleResult:
    """Run one sampler from a warm-up's tuning: what :func:`sample` does after the warm-up.

    Studies call it once per sampler with one shared warm-up (or pilot), so
    every sampler of a study is built, tuned and charged the same way.

    Parameters
    ----------
    config : SamplerConfig
        The user's settings (:func:`make_config`); tuned values fill the rest.
    tuning : Tuning
        Step size, metric, start points and draws from a warm-up; its
        ``seconds`` are charged unless ``charged`` says otherwise.
    seed : int
        Recorded in the result; ``seeds`` (default: spawned from it) seed the parts.
    charged : dict, optional
        Seconds already charged (default: the tuning's, as "warmup").
    trained : Trained, optional
        A trained autoencoder to use (its training time is charged) instead of training one.
    describe : bool
        Measure and print each approximation's cost and spread (a study that
        reports them once for all its samplers turns this off).
    progress : bool
        A progress bar per chain on stderr, if it is a terminal.
    checkpoint : path, optional
        A folder for the chains' checkpoints (``chains/`` in it, ``nuts/`` for
        latent-nuts), to resume a stopped run to the same draws.
    executor : Executor, optional
        Where the chains run, one task each (:mod:`stanaccel.sampling.tasks`),
        with the same draws as a local run of the same seed. Default (or a
        :class:`~stanaccel.executors.SerialExecutor`): in this process, in
        threads. The warm-up, tuning and autoencoder training run here; so
        does ``latent-nuts`` (Stan's NUTS runs its chains in threads of one process).
    record_log_density : bool
        Keep each draw's log density in ``run.recorded`` (chains, draws): the
        chain statistic of the autocorrelation objective (:mod:`stanaccel.sampling.tune`).
    """
    say = say or (lambda line: None)
    seeds = seeds or spawn_seeds(seed, SEEDS)
    charged = dict(charged) if charged is not None else ({"warmup": tuning.seconds} if tuning.seconds else {})
    spec = method_spec(config.method)
    tuned = tuning.settings(model.dim)
    resolved, _ = config.resolve(tuned)
    reports: dict[str, Any] = {}
    maps = None
    if spec.latent:
        if trained is None:
            trained = train(resolved, tuning, seeds["autoencoder"], say)
        maps, charged["training"], reports["autoencoder"] = trained.maps, trained.seconds, trained.report
    factory = KernelFactory(resolved, model, data, tuning, seed=seeds["subsets"], maps=maps)
    if spec.approximations and describe:
        reports["approximations"] = _describe_approximations(factory, tuning, seeds["tuning"], say)
    if spec.approximations and hasattr(model, "approximation_seconds"):
        built = [model.approximation_seconds.get(a.label, 0.0) for a in factory.approximations()]
        if sum(built):
            charged["approximations"] = sum(built)
    name = model.name.removesuffix("_model")
    if spec.build is None and spec.latent:
        run = _latent_nuts(resolved, model, data, maps, tuning, seeds, progress, say, checkpoint)
        reports["iterations"] = resolved.chains * (resolved.warmup + resolved.draws)  # its warm-up counts too
        _say_failed_quantities(run, say)
        return SampleResult(resolved, config.resolve(tuned)[1], run, name, seed, charged, reports)
    step = spec.tuned_step(resolved)
    if step and step.key not in config.user_keys() and resolved.tune > 0:
        tuned[step.key] = _tune_step(factory, model, data, tuning, step, seeds["tuning"], charged, say)
    resolved, sources_used = config.resolve(tuned)
    factory.config = resolved
    starts = _starts(tuning.starts, resolved.chains)
    thin = getattr(resolved, "thin", 1)
    say(f"{method_label(resolved)}: {resolved.chains} chains x {resolved.draws} draws" + (
        f" (every {thin}th of {resolved.draws * thin})" if thin > 1 else ""))  # fmt: skip
    if executor is None or isinstance(executor, SerialExecutor):
        run = run_chains(
            factory,
            starts,
            resolved.draws,
            seed=seeds["chains"],
            thin=thin,
            constrain=_constrainer(model, seeds["quantities"]),
            name=method_label(resolved),
            progress=progress,
            checkpoint=_part(checkpoint, "chains"),
            record=_log_density if record_log_density else None,
        )
        densities = factory.densities
    else:
        say(f"chains on {executor!r} (no checkpoints: each task's chain runs to its end)")
        run, densities = run_chains_on(
            executor, factory, starts, resolved.draws, seed=seeds["chains"], name=method_label(resolved),
            constrain=_constrainer(model, seeds["quantities"]), thin=thin,
        )  # fmt: skip
    if thin > 1:
        reports["iterations"] = resolved.chains * resolved.draws * thin
    reports["summaries"] = run.summaries
    reports["density_costs"] = [
        {"exact": _cost(d["exact"]), "approx": [_cost(a) for a in d["approx"]]} for d in densities
    ]
    _say_failed_quantities(run, say)
    return SampleResult(resolved, sources_used, run, name, seed, charged, reports)


def _log_density(state) -> float:
    return state.log_density


def _part(checkpoint: str | Path | None, part: str) -> Path | None:
    """The checkpoint folder of one part of a run (warm-up, pilot, chains), or None without checkpoints."""
    return None if checkpoint is None else Path(checkpoint) / part


def _nuts(config, model, name, seed, seeds, warmup_from, progress, say, checkpoint=None) -> SampleResult:
    resolved, sources = config.resolve({})
    charged: dict[str, float] = {}
    settings = {
        "draws": resolved.draws,
        "seed": seeds["nuts"],
        "delta": resolved.delta,
        "max_depth": resolved.max_depth,
    }
    if warmup_from is None:
        settings.update(chains=resolved.chains, warmup=resolved.warmup, metric=resolved.metric)
        say(f"Stan NUTS on {name}: {resolved.chains} chains x ({resolved.warmup} warm-up + {resolved.draws})")
    else:
        warmup_from = read_warmup(warmup_from, model)
        charge_borrowed(warmup_from, charged, say)
        if "chains" in config.user_keys():
            settings["chains"] = resolved.chains
        say(f"Stan NUTS on {name}: {resolved.draws} draws per chain from an earlier warm-up")
    fit = sample_nuts(
        model, warmup_from=warmup_from, progress=progress, checkpoint=_part(checkpoint, "nuts"), **settings
    )
    _say_failed_quantities(fit, say)
    return SampleResult(resolved, sources, fit, name, seed, charged)


BORROWED = "warmup (borrowed)"
"""The ``charged_seconds`` entry of a warm-up taken from an earlier run (``warmup_from``)."""


def charge_borrowed(state: WarmupState, charged: dict[str, float], say) -> None:
    """Charge a borrowed warm-up's recorded seconds to this run, or say that it records none."""
    if state.seconds is None:
        say(
            "the warm-up borrowed (warmup_from) records no time (CmdStan CSV files, or a netCDF file "
            "written before stanaccel recorded it), so it is not charged: ESS per second leaves it out"
        )
    else:
        charged[BORROWED] = float(state.seconds)


def _say_failed_quantities(run: NutsFit | KernelRun, say) -> None:
    """Say how many draws' generated quantities failed (NaN there), and the first error, if any did."""
    failed = run.quantities_failed
    if failed is None or not np.any(failed):
        return
    error = getattr(run, "quantities_error", None)
    say(
        f"generated quantities failed at {int(np.sum(failed))} of {failed.size} draws, which hold NaN there"
        + (f" (first: {error.splitlines()[0]})" if error else "")
    )


def read_warmup(source: WarmupState | str | Path | list, model: StanModel) -> WarmupState:
    """A warm-up from a WarmupState, a stanaccel netCDF file, or CmdStan CSV files (or their folder)."""
    if isinstance(source, WarmupState):
        return source
    paths = [Path(p) for p in (source if isinstance(source, list | tuple) else [source])]
    if all(p.suffix == ".csv" for p in paths) or (len(paths) == 1 and paths[0].is_dir()):
        from stanaccel.stan.cmdstan import read_warmup as read_cmdstan

        return read_cmdstan(paths, model)
    if len(paths) != 1:
        raise ValueError(f"a warm-up is one netCDF file or CmdStan CSV files, not {source!r}")
    return WarmupState.from_netcdf(paths[0])


def warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint=None) -> Tuning:
    """Stan's NUTS warm-up (or an earlier one) and what it tunes; its time is added to ``charged``."""
    train_from = getattr(config, "train_from", 0.5)
    if warmup_from is None:
        say(
            f"Stan NUTS warm-up on {model.name.removesuffix('_model')}: {config.chains} chains x "
            f"{config.warmup} iterations"
        )
        fit = sample_nuts(
            model,
            chains=config.chains,
            warmup=config.warmup,
            draws=0,
            seed=seeds["nuts"],
            progress=progress,
            checkpoint=_part(checkpoint, "warmup"),
        )
        if fit.interrupted:
            raise KeyboardInterrupt
        charged["warmup"] = fit.wall_seconds
        state = fit.warmup_state()
        first = int(train_from * fit.warmup_unconstrained.shape[1])
        draws = fit.warmup_unconstrained[:, first:]
    else:
        state = read_warmup(warmup_from, model)
        charge_borrowed(state, charged, say)
        if np.shape(state.positions)[-1] != model.dim:
            raise ValueError(
                f"the warm-up has {np.shape(state.positions)[-1]} unconstrained parameters; {model.name} "
                f"has {model.dim}: is it the same program?"
            )
        draws = None
        if method_spec(config.method).needs_draws:
            pilot = max(100, config.warmup // 4)
            say(f"pilot: Stan NUTS, {pilot} draws per chain from the earlier warm-up (for {config.method})")
            fit = sample_nuts(
                model,
                warmup_from=state,
                draws=pilot,
                seed=seeds["pilot"],
                progress=progress,
                checkpoint=_part(checkpoint, "pilot"),
            )
            if fit.interrupted:
                raise KeyboardInterrupt
            charged["pilot"] = fit.wall_seconds
            draws = fit.draws_unconstrained
            state = WarmupState(state.step_size, state.inv_metric, state.metric, fit.last_unconstrained())
    metric = np.mean(state.inv_metric, axis=0)
    flat = None if draws is None else draws.reshape(-1, model.dim)
    return Tuning(
        float(np.median(state.step_size)),
        metric,
        np.asarray(state.positions),
        flat,
        sum(charged.values()),
        adaptation=state,
    )


def _starts(starts: np.ndarray, chains: int) -> np.ndarray:
    """``chains`` start points, reusing the warm-up's in turn when there are fewer."""
    return starts[np.arange(chains) % len(starts)]


def _constrainer(model: StanModel, seed: int):
    """The ``constrain`` of a run's draws: every quantity of a Stan program, or a Python target's own.

    For a Stan program, :func:`~stanaccel.stan.quantities.stan_quantities`:
    parameters, transformed parameters and generated quantities (their RNG
    seeded per draw from ``seed``), ``log_lik`` as the log_likelihood group,
    a draw whose generated quantities reject NaN and counted. It runs once
    on the kept draws after the chains end, so its time is not in the
    sampling's wall time (nor in ESS per second).
    """
    if hasattr(model, "constrain"):  # a Python target names its own summaries
        return model.constrain

    def constrain(positions: np.ndarray):
        if not len(model.variables()):
            return {"theta_unc": positions}
        return stan_quantities(model, positions, seed)

    return constrain


def train(config, tuning: Tuning, seed: int, say=None) -> Trained:
    """Train the autoencoder of ``config`` (architecture, latent_dim, epochs) on the warm-up draws."""
    from stanaccel.latent import Autoencoder

    say = say or (lambda line: None)
    say(f"training the autoencoder ({config.architecture}) on {len(tuning.draws)} warm-up draws")
    autoencoder = Autoencoder.fit(
        tuning.draws,
        latent_dim=config.latent_dim,
        architecture=config.architecture,
        epochs=config.epochs,
        seed=seed,
    )
    reconstruction = autoencoder.reconstruction(tuning.draws)
    report = {
        "latent_dim": autoencoder.latent_dim,
        "architecture": autoencoder.architecture,
        "epochs": autoencoder.report.epochs,
        "training_seconds": autoencoder.report.seconds,
        "reconstruction": {k: v for k, v in reconstruction.items() if k != "rmse_per_coordinate"},
    }
    say(
        f"autoencoder: latent dimension {autoencoder.latent_dim}, {autoencoder.report.epochs} epochs in "
        f"{autoencoder.report.seconds:.1f} s"
    )
    return Trained(autoencoder.maps(), autoencoder.report.seconds, report, autoencoder)


def _describe_approximations(factory: KernelFactory, tuning: Tuning, seed: int, say) -> list[dict]:
    """Each approximation's cost and the spread of log pi - log pi* over warm-up draws (warns if wide)."""
    from stanaccel.sampling.program import approximation

    points = tuning.draws if tuning.draws is not None else tuning.starts
    points = points[np.random.default_rng(seed).choice(len(points), min(20, len(points)), replace=False)]
    exact = KeepConstants(factory.posterior())
    reports = []
    for spec in factory.approximations():
        approx = approximation(spec, factory.model, factory.data, factory.config, seed=factory.seed)
        report = describe_approximation(exact, approx, points, spec.label)
        say(
            f"approximation {spec.label}: cost {report['relative_cost']:.3g} of pi, "
            f"sd of log pi - log pi* {report['log_ratio_sd']:.3g}"
        )
        reports.append(report)
    return reports


def _tune_step(factory, model, data, tuning, step: StepTuning, seed, charged, say) -> float:
    """The method's ``step`` (pCN step h, latent step) by Robbins-Monro for its target acceptance.

    An inner kernel's step is tuned on the cheapest approximation.
    """
    from stanaccel.latent import tune_step
    from stanaccel.sampling.program import approximation

    config = factory.config
    start = time.perf_counter()
    density = model.with_data(data)
    if step.inner:
        density = approximation(factory.approximations()[-1], model, data, config, seed=factory.seed)
    value = tune_step(
        step.kernels(factory, density),
        tuning.starts[0],
        np.random.default_rng(seed),
        target=step.target,
        initial=getattr(config, step.key),
        iterations=config.tune,
        maximum=step.maximum,
    )
    charged["tuning"] = charged.get("tuning", 0.0) + time.perf_counter() - start
    say(f"tuned step {value:.3g} in {config.tune} iterations ({charged['tuning']:.1f} s)")
    return value


def _latent_nuts(config, model, data, maps, tuning, seeds, progress, say, checkpoint=None) -> KernelRun:
    """Stan's NUTS on the user's latent program (decoder weights as data), its draws decoded."""
    from stanaccel.latent import decoder_data

    latent = StanModel(compile_program(Path(config.latent_program)), {**data, **decoder_data(maps)})
    starts = maps.encode(_starts(tuning.starts, config.chains))
    say(f"Stan NUTS on the latent program: {config.chains} chains x ({config.warmup} + {config.draws})")
    fit = sample_nuts(
        latent,
        chains=config.chains,
        warmup=config.warmup,
        draws=config.draws,
        inits=starts,
        seed=seeds["chains"],
        progress=progress,
        checkpoint=_part(checkpoint, "latent-nuts"),
    )
    positions = maps.decode(fit.draws_unconstrained)
    steps = fit.sample_stats["n_steps"]
    return KernelRun(
        positions=positions,
        accepted=np.ones(steps.shape, dtype=bool),
        acceptance_probability=fit.sample_stats["acceptance_rate"],
        divergent=fit.sample_stats["diverging"],
        failed=np.zeros(steps.shape, dtype=bool),
        evaluations=steps.sum(axis=1) + fit.warmup_sample_stats["n_steps"].sum(axis=1),
        failed_proposals=np.zeros(len(steps), dtype=int),
        chain_seconds=fit.chain_seconds,
        wall_seconds=fit.wall_seconds,
        exact=False,
        sampler="NUTS in the latent space (approximate)",
        interrupted=fit.interrupted,
        **quantity_fields(_constrainer(model, seeds["quantities"])(positions)),
    )


def _cost(density) -> dict[str, float]:
    """A density's evaluations (log density and gradient) and the seconds spent in them."""
    return {
        "evaluations": evaluations(density),
        "seconds": getattr(density, "seconds", float("nan")),
    }


def write_result(
    result: SampleResult, output: str | Path, metrics_path: str | Path | None = None
) -> tuple[Path, dict[str, Any] | None]:
    """Write the InferenceData (``output``, netCDF) and, unless interrupted, the metrics (JSON).

    The metrics go to ``metrics_path``, by default ``<output without .nc>.metrics.json``
    beside the file written. Returns the
    netCDF file actually written (a rescue file if ``output`` could not be
    written) and the metrics (None for an interrupted run, too short to measure).
    """
    written = result.save(output)
    if result.interrupted:
        return written, None
    metrics = result.metrics()
    path = Path(written)
    metrics_path = metrics_path or path.with_name(path.name.removesuffix(".nc") + ".metrics.json")
    Path(metrics_path).write_text(json.dumps(jsonable(metrics), indent=2))
    return written, metrics
