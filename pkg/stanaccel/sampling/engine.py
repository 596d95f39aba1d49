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

This module is the entry point: the checks, the jobs in their order,
``--tune``, and Stan's NUTS itself. Each other job has a module of its own:
the warm-up and its :class:`~stanaccel.sampling.warmup.Adaptation`
(:mod:`~stanaccel.sampling.warmup`), latent training
(:mod:`~stanaccel.sampling.training`), the run from a warm-up to the draws
(:func:`~stanaccel.sampling.run.run_sampler`), and the result
(:mod:`~stanaccel.sampling.result`).
"""

from __future__ import annotations

import json
import os
import reprlib
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stanaccel.executors import Executor, check_reachable, executor_from
from stanaccel.extras import require_latent
from stanaccel.programs import program_path
from stanaccel.sampling.auto import auto_settings, is_auto, sample_auto
from stanaccel.sampling.build import no_laplace
from stanaccel.sampling.config import (
    APPROX_WARMUP,
    DEFAULT_NUTS_WARMUP,
    ConfigError,
    check_method_name,
    make_config,
)
from stanaccel.sampling.methods import method_spec
from stanaccel.sampling.program import (
    Program,
    ProgramConventionError,
    check_beta_used,
    check_finite_data,
    check_instance,
    check_parameters,
    check_program,
    prepare_approximations,
    prepare_data,
    warmup_approximation,
)
from stanaccel.sampling.result import SampleResult
from stanaccel.sampling.run import NO_MODES_CHECK, SEEDS, run_nuts, run_sampler
from stanaccel.sampling.training import train
from stanaccel.sampling.warmup import read_warmup, warm_up
from stanaccel.seeds import check_seed, spawn_seeds
from stanaccel.stan import CompiledProgram, StanModel, compile_program
from stanaccel.stan.data import data_file_named
from stanaccel.stan.nuts import WarmupState

if TYPE_CHECKING:  # for the annotation: --tune's modules (stanaccel.tuning) load only when a run tunes
    from stanaccel.sampling.tune import TuneSpec


def _program_file(program: str | Path | CompiledProgram | StanModel):
    """A ``.stan`` path for a bundled program's name; anything else as it is."""
    if isinstance(program, StanModel | CompiledProgram):
        return program
    path = Path(program)
    return path if path.suffix == ".stan" or path.exists() else program_path(str(program))


def load_program(program: str | Path | CompiledProgram | StanModel, include_paths=()) -> CompiledProgram:
    """The compiled program of a ``.stan`` path, a bundled name, a CompiledProgram or a StanModel (a file's
    ``#include`` files found beside it, then in ``include_paths``)."""
    program = _program_file(program)
    if isinstance(program, StanModel):
        return program.program
    if isinstance(program, CompiledProgram):
        return program
    return compile_program(Path(program), include_paths)


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
    include_paths: str | Path | list | tuple = (),
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
        One of ``stanaccel.sampling.METHODS``, or ``"auto"``: short pilots of the exact candidates,
        the one of highest projected ESS per second (everything charged) run in full
        (:mod:`stanaccel.sampling.auto`; its settings are ``chains``, ``draws``,
        ``pilot_draws`` and ``observations``).
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
    include_paths : path or list of paths, optional
        Folders to look for the files a ``.stan`` file's ``#include`` lines
        name in, after the file's own folder (which is always searched).

    Raises
    ------
    TypeError
        An argument of a type it does not take (``settings`` not a dict, a
        ``program`` that is no path, name or compiled program, ...): the
        message names the argument and what it takes.
    MissingExtraError
        A latent method without TensorFlow and Keras (``pip install "stanaccel[latent]"``).
    ConfigError
        An unknown method (the methods and ``auto`` named, with a
        suggestion); a setting is unknown, of the wrong kind or out of range (NaN,
        infinite, above 1e6); a subset's ``m`` or ``latent_dim`` too large;
        ``h-pcn`` on a Stan program; a Laplace approximation where the
        Hessian at the mode is singular (the automatic approximations are
        built before the warm-up, their time charged as "approximations").
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
    check_arguments(program, data, method, warmup_from, checkpoint, log, include_paths, tune)
    say = log or (lambda line: None)
    if is_auto(method):
        return _sample_auto(program, data, settings, seed, warmup_from, progress, sources, say, checkpoint,
                            executor, tune, include_paths)  # fmt: skip
    config = make_config(method, settings, sources)
    spec = method_spec(config.method)
    if spec.latent:
        require_latent(f"method {method!r}")  # pip install "stanaccel[latent]", before the warm-up
    check_seed(seed, "seed")
    if tune is not None and tune is not False:  # the tuning machinery is imported only where asked for
        from stanaccel.sampling.tune import checked_space, tune_spec

        tune = tune_spec(tune)
        if spec.stan_nuts:
            raise ConfigError("Stan's NUTS adapts itself: --tune is for the other methods")
        checked_space(tune, config, {})  # mistakes found before the warm-up, not after
    else:
        tune = None
    if isinstance(executor, str):
        check_reachable(executor)  # a mistake found before the warm-up, not after
    own_warmup = warmup_from is not None or is_target(program)
    if config.cheap_warmup and own_warmup and "warmup" not in config.user_keys():
        config = config.replace(warmup=DEFAULT_NUTS_WARMUP)  # the default gives way to the warm-up given
    if config.cheap_warmup and own_warmup:
        given = (
            "an earlier warm-up (warmup_from)" if warmup_from is not None else "a Python target's own warm-up"
        )
        raise ConfigError(
            f"warmup = {config.warmup!r} asks for a cheap warm-up, but the run has {given}: drop one of them"
        )
    if is_target(program):
        return _sample_target(config, program, seed, warmup_from, progress, say, checkpoint, executor, tune)
    if spec.uses_laplace(config):
        raise no_laplace(method)
    if isinstance(program, StanModel) and data is None:
        data = json.loads(program.data_json)
    data_label = f"data file {data}" if isinstance(data, str | Path) else "the data"
    data_file = data if isinstance(data, str | Path) else None
    source = Program.of(_program_file(program), include_paths)
    data = prepare_data(source, data)
    check_program(config, source, data)
    with data_file_named(data_file):
        model = StanModel(load_program(program, include_paths), data)
    check_instance(config, model, data, data_label, sources)  # before the warm-up, not after
    name = source.name
    seeds = spawn_seeds(seed, SEEDS)
    if warmup_from is not None:  # read once, and its chains counted, before anything runs
        warmup_from = read_warmup(warmup_from, model)
        check_borrowed_chains(warmup_from, config, sources)
    if spec.stan_nuts:
        result = run_nuts(config, model, name, seed, seeds, warmup_from, progress, say, checkpoint)
        result.reports["modes"] = {"not_checked": NO_MODES_CHECK}  # in metrics.json; docs/own-program.md
        return result
    prepare_approximations(config, model, data, seeds["subsets"], say)  # a singular Laplace: refused here

    charged: dict[str, float] = {}
    on = None
    if config.warmup_kind == APPROX_WARMUP and warmup_from is None:
        on = warmup_approximation(config, model, data, seeds["subsets"])
    adaptation = warm_up(model, config, seeds, warmup_from, progress, say, charged, checkpoint, on)
    if warmup_from is not None and "chains" not in config.user_keys():
        config = config.replace(chains=len(adaptation.starts))  # one chain per warm-up chain
    if "beta" in config.needs:
        check_beta_used(model, data, adaptation.starts[0])
    result = _run_tuned(
        config, model, data, adaptation, seed, seeds, charged, say, progress, checkpoint, executor, tune
    )
    result.adaptation = adaptation.warmup_state  # its file can be a later run's warm-up source
    if adaptation.report:
        result.reports["warmup"] = adaptation.report
    return result


PATH = (str, os.PathLike)


def check_arguments(
    program, data, method, warmup_from, checkpoint=None, log=None, include_paths=(), tune=None
) -> None:
    """Refuse, naming the argument and what it takes, an argument of :func:`sample` of a type it cannot use.

    Raises
    ------
    TypeError
        The argument's type is wrong (the message gives what was passed): ``tune = "yes"`` too, which
        would otherwise be read as options named "y", "e" and "s".
    ConfigError
        ``method`` names no method, nor ``auto``.
    ValueError
        ``warmup_from`` is an empty list; ``include_paths`` given with a program already compiled.
    """

    def refuse(name: str, takes: str, value) -> TypeError:
        return TypeError(f"{name} must be {takes}; not {type(value).__name__} ({reprlib.repr(value)})")

    if not isinstance(program, (*PATH, CompiledProgram, StanModel)) and not is_target(program):
        takes = "a .stan file (a str or Path), a bundled program's name, a CompiledProgram or a StanModel"
        raise refuse("program", takes, program)
    if data is not None and not isinstance(data, (*PATH, Mapping)):
        raise refuse("data", "a dict of the program's data, a Stan JSON file (a str or Path), or None", data)
    check_method_name(method)
    files = warmup_from if isinstance(warmup_from, list | tuple) else [warmup_from]
    if warmup_from is not None and not isinstance(warmup_from, WarmupState):
        if not files:
            raise ValueError(
                "warmup_from = []: give a netCDF file, CmdStan CSV files or their folder, or None"
            )
        wrong = next((f for f in files if not isinstance(f, PATH)), None)
        if wrong is not None:
            takes = ("a WarmupState, a netCDF file of an earlier run, CmdStan CSV files (a list of paths) or "
                     "their folder (a str or Path), or None")  # fmt: skip
            raise refuse("warmup_from", takes, wrong)
    if checkpoint is not None and not isinstance(checkpoint, PATH):
        raise refuse("checkpoint", "a folder (a str or Path) or None", checkpoint)
    if include_paths and not isinstance(program, PATH):
        raise ValueError(
            f"include_paths is for a .stan file's #include lines; program is a compiled "
            f"{type(program).__name__}: compile the file with them (compile_program(path, include_paths)), "
            "or drop them"
        )
    if log is not None and not callable(log):
        raise refuse("log", "a function that takes a line of text, such as print, or None", log)
    if tune is not None and not isinstance(tune, bool | Mapping):
        from stanaccel.sampling.tune import TuneSpec

        if not isinstance(tune, TuneSpec):
            takes = ("True (tune with the default options), a dict of options such as {'budget': 16, "
                     "'objective': 'ess-per-second'}, a TuneSpec, or None or False (no tuning)")  # fmt: skip
            raise refuse("tune", takes, tune)


def check_borrowed_chains(state: WarmupState, config, sources: dict[str, str] | str) -> None:
    """Refuse more chains than the borrowed warm-up ``state`` has, as ``stanaccel nuts`` and
    :func:`~stanaccel.stan.nuts.sample_nuts` do.

    Each chain starts where one of the warm-up's chains ended (a NUTS chain also continues its step
    size and metric); a chain beyond them would start where another already does, two chains from one
    point, and R-hat, which compares chains started apart, would be weaker than it says.

    Raises
    ------
    ConfigError
        ``chains`` (set by the caller) is more than ``state`` has; the message says how many it has.
    """
    held = len(state.positions)
    if "chains" not in config.user_keys() or config.chains <= held:
        return
    where = sources if isinstance(sources, str) else sources.get("chains", "settings")
    shown = f"--chains {config.chains}" if where == "--chains" else f"{where}: chains = {config.chains}"
    origin = f" in {state.origin}" if state.origin else ""
    raise ConfigError(
        f"{shown}: the warm-up{origin} has {held} chains, and each chain starts where one of them ended: "
        f"ask for {held} or fewer (leave chains out for {held}), or run a new warm-up with "
        f"{config.chains} chains"
    )


def _sample_auto(
    program,
    data,
    settings,
    seed,
    warmup_from,
    progress,
    sources,
    say,
    checkpoint,
    executor,
    tune,
    include_paths,
):
    """``method = "auto"`` (:mod:`stanaccel.sampling.auto`), after checking what it is given."""
    auto = auto_settings(settings, sources)
    check_seed(seed, "seed")
    if tune is not None:
        raise ConfigError(
            "method 'auto' pilots each candidate with its own settings; --tune tunes one method's: "
            "choose the method (--method hmc --tune) or drop --tune"
        )
    if warmup_from is not None:
        raise ConfigError(
            "method 'auto' runs its own warm-ups (a cheap one shared by the candidates, a short NUTS one for "
            "the NUTS pilot); an earlier warm-up (warmup_from) is for one method: drop one of them"
        )
    if is_target(program):
        raise ConfigError(f"method 'auto' chooses among samplers of a Stan program, not of {program.name}")
    if isinstance(executor, str):
        check_reachable(executor)  # a mistake found before the pilots, not after
    if isinstance(program, StanModel) and data is None:
        data = json.loads(program.data_json)
    data_label = f"data file {data}" if isinstance(data, str | Path) else "the data"
    data_file = data if isinstance(data, str | Path) else None
    source = Program.of(_program_file(program), include_paths)
    check_parameters(source)  # before it is compiled
    data = prepare_data(source, data)
    if auto.observations is not None:
        try:
            auto.observations.check(data)
        except ValueError as error:
            raise ProgramConventionError(str(error)) from None
    with data_file_named(data_file):
        model = StanModel(load_program(program, include_paths), data)
    check_finite_data(model, data, data_label)
    check_parameters(source, model.dim)
    with _executor(executor) as chosen:
        return sample_auto(source, model, data, auto, seed=seed, progress=progress, say=say,
                           checkpoint=checkpoint, executor=chosen)  # fmt: skip


def _run_tuned(
    config, model, data, adaptation, seed, seeds, charged, say, progress, checkpoint, executor, tune
):
    """``run_sampler``, after tuning the settings by Bayesian optimisation if ``tune`` says so."""
    found = trained = None
    if tune is not None:
        from stanaccel.sampling.tune import tune_settings, with_settings

        if method_spec(config.method).latent:  # one autoencoder for every trial and the run
            resolved, _ = config.resolve(adaptation.settings(model.dim))
            trained = train(resolved, adaptation, seeds["autoencoder"], say)
        found = tune_settings(
            config, model, data, adaptation, tune, seed=seeds["optimisation"], say=say, trained=trained
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
            config, model, data, adaptation, seed=seed, seeds=seeds, charged=charged, trained=trained,
            say=say, progress=progress, checkpoint=checkpoint, executor=chosen,
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
    adaptation = target.warm_up(config.chains, config.warmup, seeds["nuts"], say)
    charged = {"warmup": adaptation.seconds} if adaptation.seconds else {}
    return _run_tuned(
        config, target, {}, adaptation, seed, seeds, charged, say, progress, checkpoint, executor, tune
    )


@contextmanager
def _executor(spec: Executor | str | None):
    """The executor ``spec`` names, closed on leaving if it was made here (not a caller's own)."""
    if spec is None or isinstance(spec, Executor):
        yield spec
        return
    with executor_from(spec) as made:
        yield made
