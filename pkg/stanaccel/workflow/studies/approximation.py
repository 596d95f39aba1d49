"""Exact sampling with fast approximations on GP regression, against Stan NUTS.

An ``approximation_study`` step (Wang & Neal, "MCMC using fast approximations"):

1. generates gp_ard data (``data``: the generator's options);
2. runs Stan's NUTS on the exact posterior pi from dispersed starts
   (``chains`` of them; ``nuts``: warmup, draws). It is the baseline and
   the reference that every sampler's draws are checked against, by
   z-scores of posterior means and sds in units of their combined Monte
   Carlo standard error;
3. tunes the inner kernels cheaply: NUTS on an approximation (``tune``: an
   approximation; ``tune_warmup``, ``tune_draws``) gives the proposal
   covariance (of its draws), HMC's step size, and the samplers' starting
   points. Its time is charged to every sampler. ``warmup`` (of the step,
   or of a sampler, or a ``sweep`` over it) ``= "laplace"`` or
   ``"pathfinder"`` tunes them by that cheap warm-up on the same
   approximation instead (:func:`~stanaccel.workflow.studies.baseline.study_tuning`:
   its draws' covariance, its step size if one is adapted, its distinct
   draws as starts), run once for the samplers that share it and charged to
   each; the NUTS pilot then runs only for samplers that keep ``"nuts"``
   (the default) or whose cheap warm-up's diagnostics rejected its Gaussian;
4. runs each sampler in ``samplers`` (``draws`` each, expanded over any
   ``sweep`` lists) through :func:`stanaccel.sampling.run.run_sampler`,
   with the keys of ``stanaccel sample``: ``method = "mh"`` or ``"hmc"`` on
   pi alone; ``"dc"``, the discretizing chain with ``approx``, ``inner``,
   ``inner_steps``, ``moves`` (r) and ``jump`` (s); ``"tt-approx"``,
   tempered transitions over a ``ladder`` of approximations with
   ``inner_steps`` (k) transitions per level and direction; and ``scale``
   (default 2.38 / sqrt(dim)), ``step_size`` (default: the tuning run's) and
   ``n_steps`` of the inner kernel. An approximation is ``{kind = "fitc" |
   "sor" | "subset", m, scale, inducing}`` (``scale``: a subset's weight
   scaled up to the full data's; ``inducing``: ``"landmarks"`` or
   ``"kmeans"``, :mod:`stanaccel.approx`). Every sampler uses the same
   random subsets and inducing inputs.

It writes ``table.{md,csv,json}`` (one row per sampler, scored by
:mod:`stanaccel.workflow.scoring`: the warm-up that tuned it, its seconds
charged before sampling and its sampling seconds, ESS per second with and
without the tuning charged, the ratio to NUTS, autocorrelation time, R-hat, mark-move or
TT acceptance, cache hits, pi and pi* evaluations and seconds per
iteration, the largest z-score against NUTS, and ``passes``: that z-score
below the Bonferroni limit for a family-wise 1e-3 and R-hat below 1.1) and
``approximations.{md,csv,json}`` (each approximation's cost relative to pi
and the spread of log pi - log pi* over the NUTS draws), and
``ess_per_second.png`` (a bar per sampler).

NUTS, the approximations' report and the tuning (pilot or cheap warm-ups) run here; the samplers
(each sweep point one) are independent runs with their own seeds, mapped
over the workflow's executor.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.approx import KeepConstants
from stanaccel.datasets import generate
from stanaccel.programs import program_path
from stanaccel.sampling.config import Approximation, keys, make_config
from stanaccel.sampling.methods import method_spec, methods_in
from stanaccel.sampling.program import approximation, describe_approximation, prepare_data
from stanaccel.sampling.run import SEEDS
from stanaccel.sampling.tasks import SamplerTask, run_samplers
from stanaccel.sampling.warmup import Adaptation
from stanaccel.seeds import spawn_seed, spawn_seeds
from stanaccel.stan import StanModel, compile_program
from stanaccel.workflow.sample import Setting
from stanaccel.workflow.scoring import approximation_acceptance, nuts_row, plot_ess_per_second, score_row
from stanaccel.workflow.studies.baseline import (
    Run,
    StudyWarmup,
    nuts_runs,
    pilot_tuning,
    study_tuning,
    tuning_key,
)
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import INTEGER, ListOf, Table, generator_options, one_of

METHODS = methods_in("approximation")
COLUMNS = [
    "sampler",
    "settings",
    "warmup",
    "warmup_seconds",
    "sampling_seconds",
    "seconds",
    "ess_min",
    "ess_bulk_min",
    "ess_tail_min",
    "ess_per_second",
    "ess_per_second_sampling",
    "vs_nuts",
    "vs_nuts_sampling",
    "autocorrelation_time",
    "rhat_max",
    "acceptance",
    "cache_hit_fraction",
    "exact_per_iteration",
    "approx_per_iteration",
    "exact_seconds_per_iteration",
    "approx_seconds_per_iteration",
    "z_max",
    "passes",
]
SAMPLER_KEYS = sorted({k for m in METHODS for k in keys(m)} - {"chains", "draws", "warmup", "observations"})


class ApproximationEntry:
    """An approximation table in a workflow file, checked as ``stanaccel sample`` checks it."""

    def check(self, value: Any, key: str, where) -> None:
        Setting("dc").check(value, "approx", where)


def _sampler_schema(table: dict[str, Any]) -> dict[str, Any]:
    method = table.get("method", "mh")
    setting = Setting(method) if method in METHODS else Setting("dc")
    own = {k: setting for k in SAMPLER_KEYS if method not in METHODS or k in keys(method)}
    own["warmup"] = StudyWarmup([method] if method in METHODS else [])
    return {"method": one_of(*METHODS), **own, "sweep": Table({k: ListOf(v) for k, v in own.items()})}


KEYS = {
    "data": Table(generator_options("gp_ard")),
    "chains": INTEGER,
    "draws": INTEGER,
    "nuts": Table({"warmup": INTEGER, "draws": INTEGER}),
    "tune": ApproximationEntry(),
    "tune_warmup": INTEGER,
    "tune_draws": INTEGER,
    "samplers": ListOf(Table(_sampler_schema, required=("method",))),
}


def _schema(step: dict[str, Any]) -> dict[str, Any]:
    """The step's keys; its ``warmup`` (the samplers' default) checked for the methods it names."""
    samplers = step.get("samplers") if isinstance(step.get("samplers"), list) else []
    methods = {s.get("method") for s in samplers if isinstance(s, dict)} & set(METHODS)
    return {**KEYS, "warmup": StudyWarmup(sorted(methods))}


SCHEMA = Table(_schema)


def expand(samplers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each sampler once per combination of the lists in its ``sweep`` table."""
    out = []
    for sampler in samplers:
        sweep = sampler.get("sweep", {})
        base = {k: v for k, v in sampler.items() if k != "sweep"}
        for values in itertools.product(*sweep.values()):
            spec = {**base, **dict(zip(sweep, values, strict=True))}
            if spec.get("method") not in METHODS:
                raise ValueError(f"unknown sampler method {spec.get('method')!r}; have {list(METHODS)}")
            out.append(spec)
    return out


def describe(config) -> tuple[str, str]:
    """(sampler label, settings) for the table."""
    method, inner = config.method, getattr(config, "inner", "mh").upper()
    steps = f"k={getattr(config, 'inner_steps', 1)}"
    warmup = f", {config.warmup_kind} warm-up" if config.cheap_warmup else ""
    if method_spec(method).is_inner:
        return f"{method.upper()} on pi", steps + warmup
    if "approx" in config.needs:  # the discretizing chain: one approximation
        settings = f"{config.approx.label}, r={config.moves}, s={config.jump}"
        return f"DC ({inner})", settings + (f", {steps}" if config.inner_steps != 1 else "") + warmup
    levels = " > ".join(a.label for a in config.ladder)
    return f"TT ({inner})", f"n={len(config.ladder)}: {levels}, {steps}" + warmup


def approximation_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    compiled = compile_program(program_path("gp_ard"))
    data = prepare_data(compiled, generate("gp_ard", seed=seed, **step.get("data", {})).data)
    model = StanModel(compiled, data)
    chains, draws = int(step.get("chains", 2)), int(step.get("draws", 500))
    study = {"chains": chains, "draws": draws} | ({"warmup": step["warmup"]} if "warmup" in step else {})
    configs = [
        make_config(s["method"], {**study, **{k: v for k, v in s.items() if k != "method"}},
                    f"step {step['name']!r}")
        for s in expand(step.get("samplers", []))
    ]  # fmt: skip
    approx_seed = spawn_seed(seed, 0)
    specs = {
        a.label: a
        for c in configs
        for a in [getattr(c, "approx", None), *(getattr(c, "ladder", None) or [])]
        if a
    }
    tune_spec = Approximation.parse(step.get("tune", {"kind": "fitc", "m": 50}), "tune")
    specs.setdefault(tune_spec.label, tune_spec)
    starts = np.random.default_rng(spawn_seed(seed, 1)).uniform(-2, 2, size=(chains, model.dim))

    nuts = {"warmup": 500, "draws": 500, **step.get("nuts", {})}
    approx_config = make_config("dc", {"approx": tune_spec})
    tune_model = approximation(tune_spec, model, data, approx_config, seed=approx_seed).model
    fit = nuts_runs(
        model,
        chains,
        Run("Stan NUTS on pi", nuts["warmup"], nuts["draws"], spawn_seed(seed, 2)),
        inits=starts,
        progress=context.progress,
    ).baseline
    reference = fit.to_inference_data()
    nuts_score = nuts_row(fit, sampler="Stan NUTS on pi", reference=reference)
    rows = [{**nuts_score, "exact_per_iteration": nuts_score["evaluations_per_iteration"], "warmup": "nuts",
             "warmup_seconds": nuts_score["seconds"] - nuts_score["sampling_seconds"]}]  # fmt: skip

    points = fit.draws_unconstrained.reshape(-1, model.dim)
    points = points[np.random.default_rng(spawn_seed(seed, 3)).choice(len(points), 20, replace=False)]
    approx_rows = []
    for label, spec in specs.items():
        approx = approximation(spec, model, data, approx_config, seed=approx_seed)
        approx_rows.append(
            describe_approximation(KeepConstants(model.with_data(data)), approx, points, label)
        )
    print(write_table(folder, "approximations", approx_rows, list(approx_rows[0])))

    # The inner kernels' tuning: the pilot's step size, the covariance of its draws, its ends and time;
    # or a cheap warm-up's on the same approximation. Each is run once and charged to its samplers.
    tune = int(step.get("tune_warmup", 300)), int(step.get("tune_draws", 200))
    pilot_run = Run(f"tuning: Stan NUTS on {tune_spec.label}", *tune, spawn_seed(seed, 4), tune_model, False)

    @functools.cache
    def pilot():
        pilot_fit = nuts_runs(model, chains, pilot_run, inits=starts).baseline
        tune_draws = pilot_fit.draws_unconstrained.reshape(-1, model.dim)
        return pilot_tuning(pilot_fit, tune_draws, inv_metric=np.cov(tune_draws, rowvar=False))

    tunings: dict[tuple, tuple[Adaptation, dict[str, float]]] = {}
    for config in configs:
        if tuning_key(config) not in tunings:
            tunings[tuning_key(config)] = study_tuning(
                tune_model,
                config,
                spawn_seed(seed, 6),
                pilot,
                say=lambda line: print(f"  {line}", flush=True),
            )
    limit = float(norm.ppf(1 - 1e-3 / (2 * 2 * model.dim)))

    tasks = []
    for k, config in enumerate(configs):
        name, settings = describe(config)
        tuning, charged = tunings[tuning_key(config)]
        seeds = spawn_seeds(spawn_seed(seed, 5, k), SEEDS) | {"subsets": approx_seed}
        options = {"seeds": seeds, "describe": False, "charged": charged}
        tasks.append(SamplerTask(config, model, data, tuning, seed, announce=f"  {name}: {settings}",
                                 options=options))  # fmt: skip
    for config, result in zip(configs, run_samplers(context.executor, tasks), strict=True):
        name, settings = describe(config)
        tuning = tunings[tuning_key(config)][0]
        rows.append(_row(result, name, settings, rows[0], reference, limit) | _warmup_columns(result, tuning))
    table = write_table(folder, "table", rows, COLUMNS)
    plot_ess_per_second(rows, folder / "ess_per_second.png")
    print(table)
    return {"rows": rows, "approximations": approx_rows, "reference": reference}


def _warmup_columns(result, tuning: Adaptation) -> dict[str, Any]:
    """The warm-up that tuned the sampler (a rejected cheap one named), what it reported, its seconds."""
    report = tuning.report
    used = report.get("used", tuning.warmup)
    return {
        "warmup": used if used == report.get("warmup", used) else f"{used} ({report['warmup']} rejected)",
        "warmup_report": report,
        "warmup_seconds": sum(result.charged_seconds.values()),
    }


def _row(result, name: str, settings: str, nuts: dict, reference, limit: float) -> dict:
    """The scored row with the approximation columns: acceptance, cache hits, cost of pi and pi*."""
    row = score_row(result, nuts, settings=settings, reference=reference, sampler=name)
    per_chain = result.reports["density_costs"]
    iterations = result.iterations
    summaries = [s for s in result.reports["summaries"] if s]
    cache = ""
    moves = approximation_acceptance(result)
    row["acceptance"] = row["acceptance"] if moves is None else moves
    if "approx" in result.config.needs:  # the discretizing chain caches pi at its marks
        hits = sum(s["cache_hits"] for s in summaries)
        cache = hits / max(hits + sum(s["exact_evaluations"] for s in summaries), 1)
    config = result.config
    labels = [
        a.label for a in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])] if a
    ]
    row.update(
        {
            "tuning_seconds": row["charged_seconds"],
            "cache_hit_fraction": cache,
            "exact_per_iteration": sum(d["exact"]["evaluations"] for d in per_chain) / iterations,
            "approx_per_iteration": sum(a["evaluations"] for d in per_chain for a in d["approx"])
            / iterations,
            "exact_seconds_per_iteration": sum(d["exact"]["seconds"] for d in per_chain) / iterations,
            "approx_seconds_per_iteration": sum(a["seconds"] for d in per_chain for a in d["approx"])
            / iterations,
            "passes": bool(row["z_max"] < limit and not row["rhat_max"] >= 1.1),
            "per_approximation": {
                label: {
                    "evaluations_per_iteration": sum(d["approx"][i]["evaluations"] for d in per_chain)
                    / iterations,
                    "seconds_per_iteration": sum(d["approx"][i]["seconds"] for d in per_chain) / iterations,
                }
                for i, label in enumerate(labels)
            },
            "spec": result.config.as_dict(),
        }
    )
    return row
