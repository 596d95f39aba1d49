"""The run: one sampler from a warm-up's adaptation to its draws (:func:`run_sampler`).

What :func:`~stanaccel.sampling.engine.sample` does after the warm-up, and
what the studies call once per sampler from one shared warm-up: train the
autoencoder of a latent method (:mod:`~stanaccel.sampling.training`),
describe the approximations, tune the method's step by Robbins-Monro, build
the kernels (:class:`~stanaccel.sampling.build.KernelFactory`), run the
chains here or on an executor (:mod:`~stanaccel.sampling.chains`), or Stan's
NUTS on the latent program, and write every quantity of the program at the
kept draws.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.approx import KeepConstants
from stanaccel.densities import evaluations
from stanaccel.diagnostics.modes import modes_report, visited_modes_report
from stanaccel.executors import STOP_GRACE, Executor, SerialExecutor
from stanaccel.kernels import KernelRun, run_chains
from stanaccel.kernels.driver import quantity_fields
from stanaccel.kernels.evidence import evidence_report, no_evidence, unsettled
from stanaccel.sampling.batches import batch_evaluator
from stanaccel.sampling.build import KernelFactory
from stanaccel.sampling.chains import run_chains_on
from stanaccel.sampling.config import NUTS_WARMUP, PTConfig, SamplerConfig, TTConfig
from stanaccel.sampling.methods import StepTuning, method_spec
from stanaccel.sampling.program import describe_approximation, prepare_approximations
from stanaccel.sampling.result import SampleResult, method_label
from stanaccel.sampling.schedule import IMPROPER_PRIOR, adapts_schedule, placed_ladder
from stanaccel.sampling.training import Trained, train
from stanaccel.sampling.warmup import (
    Adaptation,
    borrowed_step,
    charge_borrowed,
    checkpoint_part,
    read_warmup,
)
from stanaccel.seeds import spawn_seeds
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.nuts import NutsFit, check_borrowed, sample_nuts
from stanaccel.stan.quantities import stan_quantities

SEEDS = (
    "nuts",
    "chains",
    "tuning",
    "autoencoder",
    "subsets",
    "pilot",
    "optimisation",
    "quantities",
    "warmup",
    "schedule",
)


def run_sampler(
    config: SamplerConfig,
    model: StanModel,
    data: dict[str, Any],
    adaptation: Adaptation,
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
    stop: Callable[[int, int], bool] | None = None,
) -> SampleResult:
    """Run one sampler from a warm-up's adaptation: what ``sample`` does after the warm-up.

    Studies call it once per sampler with one shared warm-up (or pilot), so
    every sampler of a study is built, tuned and charged the same way.

    Parameters
    ----------
    config : SamplerConfig
        The user's settings (:func:`make_config`); tuned values fill the rest.
    adaptation : Adaptation
        Step size, metric, start points and draws from a warm-up; its
        ``seconds`` are charged unless ``charged`` says otherwise.
    seed : int
        Recorded in the result; ``seeds`` (default: spawned from it) seed the parts.
    charged : dict, optional
        Seconds already charged (default: the adaptation's, as "warmup").
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
        threads. A method that evaluates batches of proposals (``imh`` with
        ``batch`` > 1) on a Dask executor of several workers runs its chains
        here instead and evaluates each batch across the workers
        (:mod:`~stanaccel.sampling.batches`), to the same draws. The
        warm-up, tuning and autoencoder training run here; so does
        ``latent-nuts`` (Stan's NUTS runs its chains in threads of one process).
    record_log_density : bool
        Keep each draw's log density in ``run.recorded`` (chains, draws): the
        chain statistic of the autocorrelation objective (:mod:`stanaccel.sampling.tune`).
    stop : callable (chain, draws kept) -> bool, optional
        Stops the chains early (``run_chains``' ``stop``; chains run here
        only): with ``checkpoint``, a later run of the same settings continues
        them (``method = "auto"`` runs its pilots so).
    """
    say = say or (lambda line: None)
    seeds = seeds or spawn_seeds(seed, SEEDS)
    charged = (
        dict(charged)
        if charged is not None
        else ({"warmup": adaptation.seconds} if adaptation.seconds else {})
    )
    spec = method_spec(config.method)
    tuned = adaptation.settings(model.dim)
    resolved, _ = config.resolve(tuned)
    reports: dict[str, Any] = {}
    maps = None
    if spec.latent:
        if trained is None:
            trained = train(resolved, adaptation, seeds["autoencoder"], say)
        maps, charged["training"], reports["autoencoder"] = trained.maps, trained.seconds, trained.report
    factory = KernelFactory(resolved, model, data, adaptation, seed=seeds["subsets"], maps=maps)
    if spec.approximations:  # the time to build them (surrogates, the mode and its Taylor coefficients)
        built = prepare_approximations(resolved, model, data, seeds["subsets"], say)
        if sum(built.values()):
            charged["approximations"] = sum(built.values())
    if spec.approximations and describe:
        reports["approximations"] = _describe_approximations(factory, adaptation, seeds["tuning"], say)
    name = model.name.removesuffix("_model")
    if spec.build is None and spec.latent:
        run = _latent_nuts(resolved, model, data, maps, adaptation, seeds, progress, say, checkpoint)
        reports["iterations"] = resolved.chains * (resolved.warmup + resolved.draws)  # its warm-up counts too
        say_failed_quantities(run, say)
        return SampleResult(resolved, config.resolve(tuned)[1], run, name, seed, charged, reports)
    step = spec.tuned_step(resolved)
    warmed_up = step is not None and step.unless_warmed_up and adaptation.step_size is not None
    if step and step.key not in config.user_keys() and resolved.tune > 0 and not warmed_up:
        tuned[step.key] = _tune_step(factory, model, data, adaptation, step, seeds["tuning"], charged, say)
    resolved, sources_used = config.resolve(tuned)
    factory.config = resolved
    starts = _starts(adaptation.starts, resolved.chains)
    if adapts_schedule(resolved):
        schedule, charged["schedule"] = placed_ladder(resolved, model, data, adaptation, starts,
                                                      seed=seeds["schedule"], subsets_seed=seeds["subsets"],
                                                      say=say, checkpoint=checkpoint)  # fmt: skip
        resolved = resolved.replace(betas=[float(b) for b in schedule.betas],
                                    step_factors=[float(f) for f in schedule.step_factors])  # fmt: skip
        factory.config, sources_used["betas"], sources_used["step_factors"] = resolved, "adapted", "adapted"
        factory.replicas, starts = schedule.replicas, schedule.positions  # where the adaptation left them
        reports["schedule"] = schedule.report()
    thin = getattr(resolved, "thin", 1)
    say(f"{method_label(resolved)}: {resolved.chains} chains x {resolved.draws} draws" + (
        f" (every {thin}th of {resolved.draws * thin})" if thin > 1 else ""))  # fmt: skip
    batches = batch_evaluator(executor, resolved)
    if batches is not None:
        say(f"chains here, each batch of {resolved.batch} proposals evaluated across {executor!r}")
        factory.evaluate = batches
    if executor is None or isinstance(executor, SerialExecutor) or batches is not None:
        try:
            run = run_chains(
                factory,
                starts,
                resolved.draws,
                seed=seeds["chains"],
                thin=thin,
                constrain=_constrainer(model, seeds["quantities"]),
                name=method_label(resolved),
                progress=progress,
                checkpoint=checkpoint_part(checkpoint, "chains"),
                record=_log_density if record_log_density else None,
                stop=stop,
            )
        finally:
            if batches is not None:
                batches.release()
                factory.evaluate = None
        densities = factory.densities
    else:
        say(f"chains on {executor!r} (no checkpoints: a stop ends each chain and keeps its draws)")
        try:
            run, densities = run_chains_on(
                executor, factory, starts, resolved.draws, seed=seeds["chains"], name=method_label(resolved),
                constrain=_constrainer(model, seeds["quantities"]), thin=thin,
            )  # fmt: skip
        except KeyboardInterrupt as stop:  # the message says why nothing was kept (the command line shows it)
            why = str(stop) or (
                f"the chains ran on {executor!r}, which cannot ask them to stop early"
                if executor.stop_file is None
                else f"the chains on {executor!r} did not end within {STOP_GRACE:.0f} s of the stop"
            )
            raise KeyboardInterrupt(why) from None
    if thin > 1:
        reports["iterations"] = resolved.chains * resolved.draws * thin
    reports["summaries"] = run.summaries
    evidence = _evidence(run, reports.get("schedule"), say)
    if evidence:
        reports["evidence"] = evidence
    modes = _modes(adaptation, run, isinstance(resolved, PTConfig | TTConfig), _coordinate_names(model))
    if modes:
        reports["modes"] = modes
        if modes["message"]:
            say(f"modes: {modes['message']}")
    reports["density_costs"] = [
        {"exact": _cost(d["exact"]), "approx": [_cost(a) for a in d["approx"]]} for d in densities
    ]
    say_failed_quantities(run, say)
    return SampleResult(resolved, sources_used, run, name, seed, charged, reports)


def _modes(adaptation: Adaptation, run: KernelRun, tempering: bool, names: list[str]) -> dict:
    """:func:`~stanaccel.diagnostics.modes.modes_report` of a NUTS warm-up's chains (two or more; with a
    tempering run's draws), and where a cheap warm-up before it found several modes, whether the run's
    draws visited each (:func:`~stanaccel.diagnostics.modes.visited_modes_report`); {} without either."""
    report: dict = {}
    chains = len(adaptation.starts)
    if adaptation.warmup == NUTS_WARMUP and adaptation.draws is not None and chains >= 2:
        warmup = adaptation.draws.reshape(chains, -1, adaptation.draws.shape[-1])
        report = modes_report(warmup, run.positions if tempering else None)
    found = adaptation.report.get("mode_points")
    if found and np.size(run.positions):
        visited = visited_modes_report(found, adaptation.report["mode_runs"], run.positions, names)
        message = "; ".join(m for m in (report.get("message"), visited.pop("message")) if m)
        report = {**report, **visited, "message": message}
    return report


def _coordinate_names(model) -> list[str]:
    """Each unconstrained coordinate's name as Stan writes it (``b[2,1]`` for ``b.2.1``); ``x[j]`` for a
    Python target."""
    if not hasattr(model, "param_unc_names"):
        return [f"x[{j}]" for j in range(model.dim)]
    names = []
    for name in model.param_unc_names():
        variable, *index = name.split(".")
        names.append(f"{variable}[{','.join(index)}]" if index else variable)
    return names


def _evidence(run: KernelRun, schedule: dict | None, say) -> dict:
    """:func:`~stanaccel.kernels.evidence.evidence_report` of a ``pt`` run down to beta = 0, said in the
    log; for one whose placing took the prior for improper, that there is none; else {}.

    Where there is none because the prior looked improper, the posterior's own draws are checked the same
    way (:func:`~stanaccel.kernels.evidence.unsettled`): where they did not settle either, the posterior
    looks improper too (``posterior_problem``, a reason of the verdict), which swaps that mix drifting
    replicas can hide from R-hat.
    """
    evidence = evidence_report(run.summaries)
    if not evidence and (schedule or {}).get("note") == IMPROPER_PRIOR:
        evidence = no_evidence(IMPROPER_PRIOR)
    if evidence.get("not_given") and np.size(run.positions):
        problem = unsettled(run.positions)
        if problem:
            evidence["posterior_problem"] = f"the posterior's draws did not settle either: {problem}"
            say(f"posterior: {evidence['posterior_problem']}")
    if evidence.get("not_given"):
        say(f"log evidence: not given: {evidence['not_given']}")
    elif evidence:
        value, error = evidence["log_evidence"], evidence["log_evidence_mcse"]
        say(f"evidence by stepping stone: {value:.2f} ± {error:.2g}, that is {evidence['description']}")
    return evidence


def _log_density(state) -> float:
    return state.log_density


def say_failed_quantities(run: NutsFit | KernelRun, say) -> None:
    """Say how many draws' generated quantities failed (NaN there), and the first error, if any did."""
    failed = run.quantities_failed
    if failed is None or not np.any(failed):
        return
    error = getattr(run, "quantities_error", None)
    say(
        f"generated quantities failed at {int(np.sum(failed))} of {failed.size} draws, which hold NaN there"
        + (f" (first: {error.splitlines()[0]})" if error else "")
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
    on the kept draws after the chains end, and its time is charged to the
    run (its ``wall_seconds``), as Stan's NUTS computes them inside its run.
    """
    if hasattr(model, "constrain"):  # a Python target names its own summaries
        return model.constrain

    def constrain(positions: np.ndarray):
        if not len(model.variables()):
            return {"theta_unc": positions}
        return stan_quantities(model, positions, seed)

    return constrain


def _describe_approximations(factory: KernelFactory, adaptation: Adaptation, seed: int, say) -> list[dict]:
    """Each approximation's cost and the spread of log pi - log pi* over warm-up draws (warns if wide)."""
    from stanaccel.sampling.program import approximation

    points = adaptation.draws if adaptation.draws is not None else adaptation.starts
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


def _tune_step(factory, model, data, adaptation, step: StepTuning, seed, charged, say) -> float:
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
        adaptation.starts[0],
        np.random.default_rng(seed),
        target=step.target,
        initial=getattr(config, step.key),
        iterations=config.tune,
        maximum=step.maximum,
    )
    charged["tuning"] = charged.get("tuning", 0.0) + time.perf_counter() - start
    where = "on the cheapest approximation" if step.inner else "on the posterior"
    say(f"tuned step {step.key} = {value:.3g} {where} (acceptance {step.target}) in {config.tune} iterations "
        f"({charged['tuning']:.1f} s)")  # fmt: skip
    return value


def _latent_nuts(config, model, data, maps, adaptation, seeds, progress, say, checkpoint=None) -> KernelRun:
    """Stan's NUTS on the user's latent program (decoder weights as data), its draws decoded."""
    from stanaccel.latent import decoder_data

    latent = StanModel(compile_program(Path(config.latent_program)), {**data, **decoder_data(maps)})
    starts = maps.encode(_starts(adaptation.starts, config.chains))
    say(f"Stan NUTS on the latent program: {config.chains} chains x ({config.warmup} + {config.draws})")
    fit = sample_nuts(
        latent,
        chains=config.chains,
        warmup=config.warmup,
        draws=config.draws,
        inits=starts,
        seed=seeds["chains"],
        progress=progress,
        checkpoint=checkpoint_part(checkpoint, "latent-nuts"),
    )
    positions = maps.decode(fit.draws_unconstrained)
    steps = fit.sample_stats["n_steps"]
    began = time.perf_counter()
    quantities = quantity_fields(_constrainer(model, seeds["quantities"])(positions))
    return KernelRun(
        positions=positions,
        accepted=np.ones(steps.shape, dtype=bool),
        acceptance_probability=fit.sample_stats["acceptance_rate"],
        divergent=fit.sample_stats["diverging"],
        failed=np.zeros(steps.shape, dtype=bool),
        evaluations=steps.sum(axis=1) + fit.warmup_sample_stats["n_steps"].sum(axis=1),
        failed_proposals=np.zeros(len(steps), dtype=int),
        chain_seconds=fit.chain_seconds,
        wall_seconds=fit.wall_seconds + time.perf_counter() - began,
        exact=False,
        sampler="NUTS in the latent space (approximate)",
        interrupted=fit.interrupted,
        dropped_draws=fit.dropped_draws,
        **quantities,
    )


def _cost(density) -> dict[str, float]:
    """A density's evaluations (log density and gradient) and the seconds spent in them."""
    return {
        "evaluations": evaluations(density),
        "seconds": getattr(density, "seconds", float("nan")),
    }


NO_MODES_CHECK = (
    "plain Stan NUTS has no modes check: chains that all settled in one of several separated modes agree "
    "(R-hat cannot tell); --method auto checks (L-BFGS from dispersed starts), with the same NUTS draws on "
    "a cheap posterior"
)
"""What ``method = "nuts"``'s ``metrics.json`` says under ``modes``: it stays Stan's NUTS as CmdStan runs
it, the reference of every comparison (docs/own-program.md says why)."""


def run_nuts(
    config, model, name, seed, seeds, warmup_from=None, progress=False, say=None, checkpoint=None,
    checkpoint_draws=None,
) -> SampleResult:  # fmt: skip
    """Stan's NUTS on ``model`` with ``config``'s settings (or from an earlier warm-up), as a SampleResult.

    ``checkpoint_draws``: the draws per checkpointed chunk (default
    :data:`~stanaccel.stan.chunks.CHUNK_DRAWS`), where ``checkpoint`` is given.
    """
    say = say or (lambda line: None)
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
        # A cheap warm-up's metric and points (an mh run's file) on this program and data: a step size;
        # on others sample_nuts adapts everything again.
        if not warmup_from.has_step_size and check_borrowed(warmup_from, model) is None:
            warmup_from = borrowed_step(model, warmup_from, seeds["warmup"], progress, say, charged)
        if "chains" in config.user_keys():
            settings["chains"] = resolved.chains
        say(f"Stan NUTS on {name}: {resolved.draws} draws per chain from an earlier warm-up")
    fit = sample_nuts(
        model,
        warmup_from=warmup_from,
        progress=progress,
        checkpoint=checkpoint_part(checkpoint, "nuts"),
        **({"checkpoint_draws": checkpoint_draws} if checkpoint_draws else {}),
        **settings,
    )
    say_failed_quantities(fit, say)
    return SampleResult(resolved, sources, fit, name, seed, charged)
