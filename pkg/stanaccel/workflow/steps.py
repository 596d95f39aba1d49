"""The ``generate`` and ``nuts`` steps; :mod:`stanaccel.workflow.actions` lists every action.

- ``generate``: a synthetic data set for a bundled program
  (``generator``, and the generator's options such as ``N`` and ``D``);
  writes ``data.json`` (Stan JSON) and ``truth.json``.
- ``nuts``: Stan's NUTS on a program (``program``: a bundled name or a
  ``.stan`` path; ``data``: an earlier step's name or a Stan JSON file;
  ``chains``, ``warmup``, ``draws``, ``metric``, and any other NUTS setting);
  writes ``posterior.nc`` (InferenceData), ``metrics.json`` and ``summary.txt``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.datasets import GENERATORS, generate
from stanaccel.diagnostics import convergence_metrics, summary, to_inference_data
from stanaccel.diagnostics.files import json_text, jsonable, save_or_rescue
from stanaccel.sampling.program import Program, prepare_data
from stanaccel.stan import StanModel, write_data
from stanaccel.stan.nuts import NutsSettings, sample_nuts
from stanaccel.workflow.context import RunContext, program_file
from stanaccel.workflow.sample import print_warnings, stop_if_rescued
from stanaccel.workflow.validation import (
    DATA_SOURCE,
    STAN_PROGRAM,
    STEP_KEYS,
    Table,
    generator_options,
    keys_of,
    one_of,
)


def generate_step(step: dict[str, Any], context: RunContext, seed: int) -> dict[str, Any]:
    """Generate a data set and write it as Stan JSON."""
    options = {k: v for k, v in step.items() if k not in {*STEP_KEYS, "generator"}}
    dataset = generate(step.get("generator", ""), seed=seed, **options)
    folder = _folder(context, step)
    write_data(folder / "data.json", dataset.data)
    (folder / "truth.json").write_text(json.dumps(jsonable(dataset.truth), indent=2))
    print(f"  {dataset.program} data: " + ", ".join(f"{k}={v}" for k, v in options.items()))
    return {
        "program": dataset.program,
        "data": dataset.data,
        "truth": dataset.truth,
        "data_path": folder / "data.json",
    }


def nuts_step(step: dict[str, Any], context: RunContext, seed: int) -> dict[str, Any]:
    """Run Stan's NUTS and write the InferenceData, metrics and summary."""
    data_ref = step.get("data")
    if isinstance(data_ref, str) and data_ref in context.results:
        source = context.results[data_ref]
        data, default_program = source["data"], source.get("program")
    else:
        data = None if data_ref is None else context.resolve_path(data_ref)
        default_program = None
    program = step.get("program", default_program)
    if program is None:
        raise ValueError(f"step {step['name']!r}: no program given")
    path = program_file(program, context)
    model = StanModel(path, prepare_data(Program.of(path), data))  # beta = 1 where declared
    known = set(NutsSettings.__dataclass_fields__)
    settings = {k: v for k, v in step.items() if k in known}
    unknown = set(step) - known - set(STEP_KEYS) - {"program", "data"}
    if unknown:
        raise ValueError(f"step {step['name']!r}: unknown NUTS settings {sorted(unknown)}")
    settings["seed"] = seed
    plan = NutsSettings(**settings)
    lengths = f"{plan.chains} chains x ({plan.warmup} warm-up + {plan.draws}) iterations"
    print(f"  NUTS on {model.name}: {lengths}", flush=True)
    fit = sample_nuts(model, progress=context.progress, checkpoint=context.checkpoints(step), **settings)
    if fit.resumed_draws is not None and fit.resumed_draws.any():
        print(f"  resumed from checkpoints: draws per chain taken from them {fit.resumed_draws.tolist()}")
    idata = to_inference_data(fit)
    folder = _folder(context, step)
    stop_if_rescued(save_or_rescue(idata, folder / "posterior.nc"), step)
    if fit.interrupted:  # too few draws for summaries; the runner stops the workflow here
        print(f"  interrupted: wrote {folder / 'posterior.nc'} with {fit.num_draws} draws per chain")
        return {"fit": fit, "idata": idata, "metrics": {"interrupted": True}}
    sampling_seconds = float(np.max(fit.chain_seconds))
    metrics = convergence_metrics(
        idata,
        wall_seconds=fit.wall_seconds,
        gradient_evaluations=fit.gradient_evaluations,
    )
    metrics.update(
        {
            "method": "stan_nuts",
            "program": model.name,
            "divergences": int(fit.sample_stats["diverging"].sum()),
            "chain_seconds_max": sampling_seconds,
            "step_size": fit.step_size.tolist(),
            "interrupted": fit.interrupted,
        }
    )
    (folder / "metrics.json").write_text(json_text(metrics))  # strict JSON: an undefined R-hat is null
    table = summary(idata).to_string()
    (folder / "summary.txt").write_text(table + "\n")
    print(table)
    print(
        f"  ESS bulk min {metrics['ess_bulk_min']:.0f}, R-hat max {metrics['rhat_max']:.3f}, "
        f"{metrics['wall_seconds']:.2f} s, {metrics['gradient_evaluations']} gradients"
        f"{'' if metrics['converged'] else ', NOT CONVERGED'} -> {folder}"
    )
    print_warnings(metrics)
    return {"fit": fit, "idata": idata, "metrics": metrics}


# What each step may set besides name, action and seed (see stanaccel.workflow.validation).
GENERATE_SCHEMA = Table(
    lambda step: {"generator": one_of(*GENERATORS), **generator_options(step.get("generator"))},
    required=("generator",),
)
NUTS_SCHEMA = Table({"program": STAN_PROGRAM, "data": DATA_SOURCE, **keys_of(NutsSettings)})


def _folder(context: RunContext, step: dict[str, Any]) -> Path:
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    return folder
