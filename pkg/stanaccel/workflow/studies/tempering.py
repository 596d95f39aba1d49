"""The tempering experiments: samplers side by side on one posterior, with Stan NUTS as reference.

For each data size, a ``tempering_study`` step generates data, runs Stan's
NUTS (the reference row; its warm-up can tune the samplers), then each
sampler through :func:`stanaccel.sampling.run.run_sampler` from the same
starts, scored by :mod:`stanaccel.workflow.scoring`, and writes:

- ``table.csv`` / ``table.md``: per sampler and size, wall time, time per
  iteration, cost relative to the non-tempered inner sampler (the paper's
  "computational cost relative to HMC"), ESS bulk min, ESS per second,
  R-hat (max and median), swap acceptance, round trips, TT acceptance, and
  (in the CSV) evaluations per density: per level for a subsampled ladder,
  posterior then prior for a power ladder;
- ``rhat_trace.csv``: median R-hat over parameters against draws and wall
  time (each prefix of the chains, its first half discarded, as in the paper).

The step sets ``program`` (a bundled program, default ``gp_ard``),
``generator`` (default: the program's name), ``sizes`` (a list of the
generator's options), ``samplers`` and ``inner`` (lists of methods and inner
kernels), ``chains``, ``draws``, ``nuts_warmup``, the samplers' settings
(the keys of ``stanaccel sample``: ``levels``, ``beta_min``, ``betas``,
``schedule_rounds``, ``scale``, ``step_size``, ``n_steps``, ``inner_steps``, ``swap``,
``temperature_scaling``) and ``tune_from_nuts`` (the samplers take NUTS's
adapted step size and metric, and MH the scale 2.38 / sqrt(dim), where the
step does not set them; without it, settings not given take their defaults
and no metric). ``nuts = false`` leaves the NUTS row out (for cost-only
studies). Starts are dispersed (uniform in (-2, 2) on the unconstrained
scale, as Stan's; ``start = "dispersed"``, the default) for every sampler,
or, with ``start = "nuts_warmup"``, the samplers begin where NUTS's warm-up
ended. A sampler that uses NUTS's warm-up (its adaptation or its end points)
is charged the warm-up's time in ``ess_per_second``;
``ess_per_second_sampling`` leaves it out.

The sampler runs of all sizes are independent: once each size's NUTS has
run (here), they are mapped over the workflow's executor (``[workflow]
executor``, ``--executor``), each with its own seed, so the table's numbers
other than times are the same on any executor.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.datasets import GENERATORS, generate
from stanaccel.diagnostics.metrics import rhat_trace
from stanaccel.kernels.ladder import geometric_betas
from stanaccel.programs import program_path
from stanaccel.sampling.config import INNER_KERNELS, keys, make_config
from stanaccel.sampling.methods import method_spec, methods_in
from stanaccel.sampling.program import prepare_data
from stanaccel.sampling.result import method_label
from stanaccel.sampling.tasks import SamplerTask, run_samplers
from stanaccel.sampling.warmup import Adaptation, warmup_share
from stanaccel.seeds import spawn_seed
from stanaccel.stan import StanModel, compile_program
from stanaccel.workflow.sample import Setting
from stanaccel.workflow.scoring import nuts_row, score_row
from stanaccel.workflow.studies.baseline import Run, adapted_step, nuts_runs
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import BOOLEAN, INTEGER, STRING, ListOf, Table, generator_options, one_of

METHODS = methods_in("tempering")
TEMPERED = tuple(m for m in METHODS if method_spec(m).tempering)
"""The default ``samplers``: every tempered method of the study (not the inner kernels alone)."""
DEFAULT_INNER = ("hmc",)
"""The default ``inner`` kernels."""
SETTINGS = ("levels", "beta_min", "betas", "schedule_rounds", "scale", "step_size", "n_steps",
            "n_steps_jitter", "inner_steps", "swap", "temperature_scaling", "precondition")  # fmt: skip


def _schema(step: dict[str, Any]) -> dict[str, Any]:
    """The step's keys; ``sizes`` holds options of the generator (``generator``, else ``program``)."""
    generator = step.get("generator", step.get("program", "gp_ard"))
    return {
        # Without a generator, the program's name is the generator's.
        "program": STRING if "generator" in step else one_of(*GENERATORS),
        "generator": one_of(*GENERATORS),
        "sizes": ListOf(Table(generator_options(generator))),
        "samplers": ListOf(one_of(*METHODS)),
        "inner": ListOf(one_of(*INNER_KERNELS)),
        "chains": INTEGER,
        "draws": INTEGER,
        "nuts": BOOLEAN,
        "nuts_warmup": INTEGER,
        "tune_from_nuts": BOOLEAN,
        "start": one_of("dispersed", "nuts_warmup"),
        **{key: Setting("spt") for key in SETTINGS},
    }


SCHEMA = Table(_schema)


def sampler_configs(step: dict[str, Any], source: str = "tempering_study"):
    """The configuration of every (method, inner) pair the step asks for."""
    configs = []
    for inner in step.get("inner", list(DEFAULT_INNER)):
        for method in step.get("samplers", list(TEMPERED)):
            if method_spec(method).is_inner and method != inner:
                continue  # an inner kernel alone: once, in its own inner's turn
            settings = {k: step[k] for k in SETTINGS if k in step and k in keys(method)}
            if "inner" in keys(method):
                settings["inner"] = inner
            settings.update(chains=int(step.get("chains", 4)), draws=int(step.get("draws", 500)))
            configs.append(make_config(method, settings, source))
    return configs


def tempering_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study and write its tables (see the module docstring)."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    program = step.get("program", step.get("generator", "gp_ard"))
    compiled = compile_program(program_path(program))
    chains = int(step.get("chains", 4))
    sizes = []  # per size: its label, NUTS row, tuning and sampler tasks
    for size_index, size in enumerate(step.get("sizes", [{}])):
        label = ", ".join(f"{k}={v}" for k, v in size.items())
        data = prepare_data(compiled, generate(step.get("generator", program), seed=seed, **size).data)
        model = StanModel(compiled, data)
        starts = np.random.default_rng(spawn_seed(seed, size_index, 0)).uniform(
            -2, 2, size=(chains, model.dim)
        )
        uses_warmup = step.get("tune_from_nuts", False) or step.get("start") == "nuts_warmup"
        tuning = Adaptation(None, np.ones(model.dim), starts, None, 0.0)
        nuts, nuts_table_row = None, None
        if step.get("nuts", True) or uses_warmup:
            warmup, draws = int(step.get("nuts_warmup", 500)), int(step.get("draws", 500))
            nuts_seed = spawn_seed(seed, size_index, 1)
            fit = nuts_runs(model, chains, Run(f"{label}: Stan NUTS", warmup, draws, nuts_seed),
                            inits=starts).baseline  # fmt: skip
            nuts = nuts_row(fit, sampler="Stan NUTS (warm-up included)")
            warmup_seconds = fit.wall_seconds * warmup_share(fit)
            per_iteration = fit.wall_seconds / (warmup + draws)
            nuts_table_row = _tempering_row(nuts, label, "nuts", "", fit.wall_seconds, per_iteration,
                                            warmup_seconds)  # fmt: skip
            if step.get("tune_from_nuts", False):
                tuning.step_size, tuning.inv_metric = adapted_step(fit)
            if step.get("start") == "nuts_warmup":
                tuning.starts = fit.warmup_unconstrained[:, -1]
            tuning.seconds = warmup_seconds if uses_warmup else 0.0
        tasks = []
        for k, config in enumerate(sampler_configs(step)):
            if not step.get("tune_from_nuts", False) and "precondition" not in config.user_keys():
                config = config.replace(precondition=False)
            announce = f"  {label}: {method_label(config)}"
            tasks.append(SamplerTask(config, model, data, tuning, spawn_seed(seed, size_index, 2 + k),
                                     announce=announce))  # fmt: skip
        sizes.append((label, nuts, nuts_table_row, tuning, tasks))
    # Every sampler run of every size is independent: one map over the executor.
    results = iter(run_samplers(context.executor, [t for *_, tasks in sizes for t in tasks]))
    rows, traces = [], []
    for label, nuts, nuts_table_row, tuning, tasks in sizes:
        if nuts_table_row is not None:
            rows.append(nuts_table_row)
        base_seconds: dict[str, float] = {}
        for task in tasks:
            config, result = task.config, next(results)
            row = score_row(result, nuts)
            inner = getattr(config, "inner", config.method)  # an inner kernel alone is its own
            per_iteration = float(np.mean(result.run.chain_seconds)) / config.draws
            row = _tempering_row(row, label, config.method, inner, result.run.wall_seconds, per_iteration,
                                 tuning.seconds, result)  # fmt: skip
            if method_spec(config.method).is_inner:
                base_seconds[config.method] = row["seconds_per_iteration"]
            rows.append(row)
            traces += _trace(result, label, row["sampler"])
        for row in rows:
            if row["size"] == label and row["inner"] in base_seconds:  # NUTS's row has no inner
                row["cost_vs_inner"] = row["seconds_per_iteration"] / base_seconds[row["inner"]]
    _write_tables(folder, rows, traces)
    return {"rows": rows, "rhat_trace": traces}


def _tempering_row(
    score: dict,
    label: str,
    method: str,
    inner: str,
    wall: float,
    per_iteration: float,
    warmup: float,
    result=None,
) -> dict:
    """A scored row with the tempering columns: per-iteration time, the ladder (its levels and hot end,
    placed or given), swaps, round trips, TT acceptance."""
    spec = method_spec(method)
    summaries = [s for s in result.reports["summaries"] if s] if result is not None else []
    ladder = _ladder(result.config) if result is not None else None
    swaps = [s["swap_acceptance"] for s in summaries if "swap_acceptance" in s]
    swap = np.mean(swaps, axis=0) if swaps else []
    return {
        "size": label,
        "method": method,
        "inner": inner,
        **score,
        "wall_seconds": wall,
        "seconds_per_iteration": per_iteration,
        "cost_vs_inner": 1.0 if spec.is_inner else float("nan"),
        "warmup_seconds": warmup,
        "levels": len(ladder) if ladder is not None else "",
        "hot_end": float(ladder[-1]) if ladder is not None else "",
        "swap_acceptance": " ".join(f"{a:.2f}" for a in np.atleast_1d(swap)) if np.size(swap) > 1 else "",
        "round_trips": int(sum(s.get("round_trips", 0) for s in summaries))
        if spec.tempering == "swaps"
        else "",
        "tt_acceptance": float(np.mean([s["tt_acceptance"] for s in summaries]))
        if spec.tempering == "transitions"
        else "",
        "evaluations_per_density": " ".join(
            str(n) for n in np.sum([s["evaluations_per_density"] for s in summaries], axis=0).astype(int)
        )
        if summaries and "evaluations_per_density" in summaries[0]
        else "",
    }


def _ladder(config) -> np.ndarray | None:
    """The betas a tempering run used: placed or given, else the geometric ladder of levels and beta_min."""
    if getattr(config, "betas", None) is not None:
        return np.asarray(config.betas)
    if hasattr(config, "levels") and hasattr(config, "beta_min"):
        return geometric_betas(config.levels, config.beta_min)
    return None


def _trace(result, label: str, sampler: str) -> list[dict]:
    seconds_per_draw = result.run.wall_seconds / max(result.config.draws, 1)
    return [
        {"size": label, "sampler": sampler, "draws": k, "seconds": k * seconds_per_draw, "rhat_median": r}
        for k, r in rhat_trace(result.run.positions)
    ]


def _write_tables(folder: Path, rows: list[dict], traces: list[dict]) -> None:
    with open(folder / "rhat_trace.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["size", "sampler", "draws", "seconds", "rhat_median"])
        writer.writeheader()
        writer.writerows(traces)
    columns = ["size", "sampler", "wall_seconds", "cost_vs_inner", "ess_min", "ess_bulk_min",
               "ess_per_second", "ess_per_second_sampling", "rhat_max", "rhat_median", "levels", "hot_end",
               "swap_acceptance", "round_trips", "tt_acceptance"]  # fmt: skip
    print(write_table(folder, "table", rows, columns))
