"""The tempering experiments: samplers side by side on one posterior, with Stan NUTS as reference.

For each data size, a ``tempering_study`` step generates data, runs Stan's
NUTS (the reference row; its adapted step size and metric can tune the inner
kernels), then each sampler from the same dispersed starts, and writes:

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
(``levels``, ``beta_min``, ``betas``, ``mh_scale``, ``step_size``,
``n_steps``, ``inner_steps``, ``swap``) and ``tune_from_nuts`` (inner
kernels take NUTS's adapted step size and metric).
``nuts = false`` leaves the NUTS row out (for cost-only studies). Starts
are dispersed (uniform in (-2, 2) on the unconstrained scale, as Stan's;
``start = "dispersed"``, the default) for every sampler, or, with
``start = "nuts_warmup"``, the samplers begin where NUTS's warm-up ended.
A sampler that uses NUTS's warm-up (its adaptation or its end points) is
charged the warm-up's time in ``ess_per_second``;
``ess_per_second_sampling`` leaves it out. The warm-up's
share of NUTS's time is estimated by its share of the gradient evaluations.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.datasets import GENERATORS, generate
from stanaccel.diagnostics import convergence_metrics, to_inference_data
from stanaccel.diagnostics.metrics import rhat_trace
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.nuts import sample_nuts
from stanaccel.workflow.samplers import METHODS, SamplerSpec, run_sampler
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import (
    BOOLEAN,
    INTEGER,
    STRING,
    ListOf,
    Table,
    generator_options,
    keys_of,
    one_of,
)

SPEC_KEYS = {"levels", "beta_min", "betas", "mh_scale", "step_size", "n_steps", "inner_steps", "swap"}


def _schema(step: dict[str, Any]) -> dict[str, Any]:
    """The step's keys; ``sizes`` holds options of the generator (``generator``, else ``program``)."""
    generator = step.get("generator", step.get("program", "gp_ard"))
    return {
        # Without a generator, the program's name is the generator's.
        "program": STRING if "generator" in step else one_of(*GENERATORS),
        "generator": one_of(*GENERATORS),
        "sizes": ListOf(Table(generator_options(generator))),
        "samplers": ListOf(one_of(*METHODS)),
        "inner": ListOf(one_of("mh", "hmc")),
        "chains": INTEGER,
        "draws": INTEGER,
        "nuts": BOOLEAN,
        "nuts_warmup": INTEGER,
        "tune_from_nuts": BOOLEAN,
        "start": one_of("dispersed", "nuts_warmup"),
        **{k: v for k, v in keys_of(SamplerSpec).items() if k in SPEC_KEYS},
    }


SCHEMA = Table(_schema)


def sampler_specs(step: dict[str, Any]) -> list[SamplerSpec]:
    """Every (method, inner) pair the step asks for."""
    settings = {k: step[k] for k in SPEC_KEYS if k in step}
    specs = []
    for inner in step.get("inner", ["hmc"]):
        for method in step.get("samplers", ["pt", "tt", "spt", "stt"]):
            if method in ("mh", "hmc") and method != inner:
                continue
            specs.append(SamplerSpec(method=method, inner=inner, **settings))
    return specs


def tempering_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study and write its tables (see the module docstring)."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    program = step.get("program", step.get("generator", "gp_ard"))
    compiled = compile_program(program_path(program))
    chains, draws = int(step.get("chains", 4)), int(step.get("draws", 500))
    rows, traces = [], []
    for size_index, size in enumerate(step.get("sizes", [{}])):
        label = ", ".join(f"{k}={v}" for k, v in size.items())
        data = generate(step.get("generator", program), seed=seed, **size).data
        model = StanModel(compiled, data)
        rng = np.random.default_rng([seed, size_index])
        starts = rng.uniform(-2, 2, size=(chains, model.dim))
        uses_warmup = step.get("tune_from_nuts", False) or step.get("start") == "nuts_warmup"
        if step.get("nuts", True) or uses_warmup:
            nuts_row, nuts_fit = _nuts_row(step, model, starts, seed, label)
            rows.append(nuts_row)
        warmup_seconds = nuts_row["warmup_seconds"] if uses_warmup else 0.0
        if step.get("start") == "nuts_warmup":
            starts = nuts_fit.warmup_unconstrained[:, -1]
        base_seconds: dict[str, float] = {}
        for spec in sampler_specs(step):
            if step.get("tune_from_nuts", False):
                _tune(spec, nuts_fit, model.dim)
            print(f"  {label}: {spec.label}", flush=True)
            run = run_sampler(spec, model, data, program, starts, draws, seed=seed)
            row, trace = _row(run, spec, label, draws, warmup_seconds)
            if spec.method in ("mh", "hmc"):
                base_seconds[spec.method] = row["seconds_per_iteration"]
            rows.append(row)
            traces += trace
        for row in rows:
            if row["size"] == label and row["inner"] in base_seconds and row["method"] != "nuts":
                row["cost_vs_inner"] = row["seconds_per_iteration"] / base_seconds[row["inner"]]
    _write_tables(folder, rows, traces)
    return {"rows": rows, "rhat_trace": traces}


def _tune(spec: SamplerSpec, fit, dim: int) -> None:
    """Inner kernels from NUTS's adaptation: its step size and metric, MH scaled 2.38/sqrt(d)."""
    spec.step_size = float(np.median(fit.step_size))
    spec.inv_metric = np.mean(fit.inv_metric, axis=0)
    spec.mh_scale = 2.38 / np.sqrt(dim)
    spec.scale_step_size = True


def _nuts_row(step, model, starts, seed, label):
    warmup = int(step.get("nuts_warmup", 500))
    draws = int(step.get("draws", 500))
    start = time.perf_counter()
    fit = sample_nuts(model, chains=len(starts), warmup=warmup, draws=draws, seed=seed % 2**32,
                      inits=starts, progress=False)  # fmt: skip
    seconds = time.perf_counter() - start
    idata = to_inference_data(fit)
    warmup_share = fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1)
    metrics = convergence_metrics(
        idata,
        wall_seconds=seconds,
        sampling_seconds=seconds * (1 - warmup_share),
        gradient_evaluations=fit.gradient_evaluations,
    )
    row = {
        "size": label,
        "method": "nuts",
        "inner": "",
        "sampler": "Stan NUTS (warm-up included)",
        "wall_seconds": seconds,
        "seconds_per_iteration": seconds / (warmup + draws),
        "cost_vs_inner": float("nan"),
        "warmup_seconds": seconds * warmup_share,
        "ess_bulk_min": metrics["ess_bulk_min"],
        "ess_per_second": metrics["ess_per_second"],
        "ess_per_second_sampling": metrics["ess_per_second_sampling"],
        "rhat_max": metrics["rhat_max"],
        "rhat_median": float(np.median(list(metrics["rhat"].values()))),
        "swap_acceptance": "",
        "round_trips": "",
        "tt_acceptance": "",
        "evaluations": fit.gradient_evaluations,
        "evaluations_per_density": "",
    }
    return row, fit


def _row(run, spec: SamplerSpec, label: str, draws: int, warmup_seconds: float):
    idata = to_inference_data(run)
    metrics = convergence_metrics(
        idata, wall_seconds=run.wall_seconds + warmup_seconds, sampling_seconds=run.wall_seconds
    )
    summaries = [s for s in run.summaries if s]
    swaps = [s["swap_acceptance"] for s in summaries if "swap_acceptance" in s]
    swap = np.mean(swaps, axis=0) if swaps else []
    row = {
        "size": label,
        "method": spec.method,
        "inner": spec.inner if spec.method not in ("mh", "hmc") else spec.method,
        "sampler": spec.label,
        "wall_seconds": run.wall_seconds,
        "seconds_per_iteration": float(np.mean(run.chain_seconds)) / draws,
        "cost_vs_inner": 1.0 if spec.method in ("mh", "hmc") else float("nan"),
        "warmup_seconds": warmup_seconds,
        "ess_bulk_min": metrics["ess_bulk_min"],
        "ess_per_second": metrics["ess_per_second"],
        "ess_per_second_sampling": metrics["ess_per_second_sampling"],
        "rhat_max": metrics["rhat_max"],
        "rhat_median": float(np.median(list(metrics["rhat"].values()))),
        "swap_acceptance": " ".join(f"{a:.2f}" for a in np.atleast_1d(swap)) if np.size(swap) > 1 else "",
        "round_trips": int(sum(s.get("round_trips", 0) for s in summaries))
        if spec.method in ("pt", "spt")
        else "",
        "tt_acceptance": float(np.mean([s["tt_acceptance"] for s in summaries]))
        if spec.method in ("tt", "stt")
        else "",
        "evaluations": int(run.evaluations.sum()),
        "evaluations_per_density": " ".join(
            str(n) for n in np.sum([s["evaluations_per_density"] for s in summaries], axis=0).astype(int)
        )
        if summaries
        else "",
    }
    seconds_per_draw = run.wall_seconds / max(draws, 1)
    trace = [
        {"size": label, "sampler": spec.label, "draws": k, "seconds": k * seconds_per_draw, "rhat_median": r}
        for k, r in rhat_trace(run.positions)
    ]
    return row, trace


def _write_tables(folder: Path, rows: list[dict], traces: list[dict]) -> None:
    with open(folder / "rhat_trace.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["size", "sampler", "draws", "seconds", "rhat_median"])
        writer.writeheader()
        writer.writerows(traces)
    columns = ["size", "sampler", "wall_seconds", "cost_vs_inner", "ess_bulk_min", "ess_per_second",
               "ess_per_second_sampling", "rhat_max", "rhat_median", "swap_acceptance", "round_trips",
               "tt_acceptance"]  # fmt: skip
    print(write_table(folder, "table", rows, columns))
