"""The ``sample`` step: any stanaccel sampler on a program, as ``stanaccel sample`` runs it.

Keys: ``program`` (a bundled name or a ``.stan`` file; default: the data
step's program), ``data`` (an earlier step or a Stan JSON file), ``method``
(default ``nuts``; ``auto``: pilots, the best run in full, :mod:`stanaccel.sampling.auto`),
``warmup_from`` (an earlier ``nuts`` step or ``sample``
step with method ``nuts``, a netCDF file, or a list of CmdStan CSV files), ``tuning`` (a table: tune
the settings by Bayesian optimisation, as ``stanaccel sample --tune``; see :data:`TUNE_SCHEMA`), and the
method's settings
(``stanaccel.sampling.keys(method)``), the same keys as ``--set`` on the
command line. The chains run on the workflow's executor. Writes
``posterior.nc`` (InferenceData with the settings used and ``exact`` in its
attributes), ``metrics.json``, ``summary.txt`` and ``statistics.json``: each
chain's kernel statistics (tempering swap acceptance and round trips, the
discretizing chain's mark acceptance and cache hits, ...) and the
autoencoder's training and reconstruction error, which the report
(:mod:`stanaccel.diagnostics.report`) shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from stanaccel.diagnostics.files import Written, json_text, jsonable
from stanaccel.errors import OutputFailed
from stanaccel.sampling.auto import AUTO, AUTO_KEYS, auto_settings, is_auto
from stanaccel.sampling.config import ConfigError, check_setting, keys
from stanaccel.sampling.engine import sample
from stanaccel.sampling.methods import METHODS, method_spec
from stanaccel.sampling.result import SampleResult, write_result
from stanaccel.sampling.tune import OBJECTIVES
from stanaccel.workflow.context import RunContext, program_file
from stanaccel.workflow.validation import (
    DATA_SOURCE,
    INTEGER,
    STAN_PROGRAM,
    TABLE,
    WARMUP_SOURCE,
    Table,
    Where,
    one_of,
)

STEP_ONLY = ("program", "data", "method", "warmup_from", "tuning")


class Setting:
    """A sampler setting of a workflow step, checked by the sampler configuration itself."""

    def __init__(self, method: str):
        self.method = method

    def check(self, value: Any, key: str, where: Where) -> None:
        name = re.sub(r"\[\d+\]$", "", key.rsplit(".", 1)[-1])  # "samplers[0].sweep.jump[1]" -> "jump"
        try:
            check_setting(self.method, name, value, shown=key)
        except ConfigError as error:
            raise where.error(str(error)) from None


class WarmupSource:
    """An earlier Stan NUTS run (:func:`gives`), a netCDF file, or CmdStan CSV files (one per chain)."""

    def check(self, value: Any, key: str, where: Where) -> None:
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            for index, path in enumerate(value):
                if not ((where.file.parent / path).is_file() or Path(path).is_file()):
                    raise where.error(f"{key}[{index}] = {path!r}: no such CmdStan CSV file")
            return
        WARMUP_SOURCE.check(value, key, where)


TUNE_SCHEMA = Table(
    {"budget": INTEGER, "draws": INTEGER, "chains": INTEGER, "objective": one_of(*OBJECTIVES), "space": TABLE}
)
"""A sample step's ``tuning`` table (``stanaccel sample --tune``): the options of
:class:`stanaccel.sampling.tune.TuneSpec`. Not ``tune``, which is a setting of the pCN and
latent methods (the step's own Robbins-Monro tuning)."""


class AutoSetting:
    """A setting of a step whose method is ``auto``: refused, saying why, unless ``auto`` takes it."""

    def check(self, value: Any, key: str, where: Where) -> None:
        try:
            auto_settings({key: value}, "step")
        except ConfigError as error:
            raise where.error(str(error)) from None


def _schema(step: dict[str, Any]) -> dict[str, Any]:
    method = step.get("method", "nuts")
    settings = {key: Setting(method) for key in keys(method)} if method in METHODS else {}
    if is_auto(method):  # every method's settings, to refuse them with the reason
        names = {key: None for name in METHODS for key in keys(name)} | dict.fromkeys(AUTO_KEYS)
        settings = {key: AutoSetting() for key in names}
    return {
        "program": STAN_PROGRAM,
        "data": DATA_SOURCE,
        "method": one_of(*METHODS, AUTO),
        "warmup_from": WarmupSource(),
        "tuning": TUNE_SCHEMA,
        **settings,
    }


SCHEMA = Table(_schema)


def gives(step: dict[str, Any]) -> frozenset[str]:
    """What a later step can take from a sample step: the warm-up of Stan's NUTS (``warmup_from``), where
    its method is Stan's NUTS or ``auto`` (which may choose it)."""
    method = step.get("method", "nuts")
    if is_auto(method) or (method in METHODS and method_spec(method).stan_nuts):
        return frozenset({"warmup"})
    return frozenset()


def resolve_paths(settings: dict[str, Any], context: RunContext) -> dict[str, Any]:
    """Settings with their file names (approximation programs and data, latent programs) found
    beside the workflow file, as ``program`` and ``data`` are."""

    def approximation(table):
        if not isinstance(table, dict):
            return table
        return {k: str(context.resolve_path(v)) if k in ("program", "data") else v for k, v in table.items()}

    out = dict(settings)
    if "approx" in out:
        out["approx"] = approximation(out["approx"])
    if isinstance(out.get("ladder"), list):
        out["ladder"] = [approximation(a) for a in out["ladder"]]
    if isinstance(out.get("latent_program"), str):
        out["latent_program"] = str(context.resolve_path(out["latent_program"]))
    return out


def sample_step(step: dict[str, Any], context: RunContext, seed: int) -> dict[str, Any]:
    """Run the sampler and write its InferenceData, metrics and summary."""
    data_ref = step.get("data")
    data, program = None, step.get("program")
    if isinstance(data_ref, str) and data_ref in context.results:
        source = context.results[data_ref]
        data, program = source["data"], program or source.get("program")
    elif data_ref is not None:
        data = context.resolve_path(data_ref)
    if program is None:
        raise ValueError(
            f"step {step['name']!r}: no program given (set program, or data from a generate step)"
        )
    warmup_from = step.get("warmup_from")
    if isinstance(warmup_from, str) and warmup_from in context.results:
        earlier = context.results[warmup_from]
        if "fit" not in earlier:
            chose = getattr(earlier.get("result"), "method", None)
            raise ValueError(
                f"step {step['name']!r}: warmup_from = {warmup_from!r}: that step ran "
                f"{chose or 'no Stan NUTS'}{' (chosen by method auto)' if chose else ''}, so it has no Stan "
                "NUTS warm-up to take; take it from a nuts step, or a sample step with method 'nuts'"
            )
        warmup_from = earlier["fit"].warmup_state()
    elif isinstance(warmup_from, list):
        warmup_from = [context.resolve_path(p) for p in warmup_from]
    elif warmup_from is not None:
        warmup_from = context.resolve_path(warmup_from)
    settings = resolve_paths(
        {k: v for k, v in step.items() if k not in (*STEP_ONLY, "name", "action", "seed")}, context
    )
    where = f"{context.workflow.source or 'workflow'}: step {step['name']!r}"
    result = sample(
        program_file(program, context),
        data,
        step.get("method", "nuts"),
        settings,
        seed=seed,
        warmup_from=warmup_from,
        progress=context.progress,
        sources=where,
        log=lambda line: print(f"  {line}", flush=True),
        checkpoint=context.checkpoints(step),
        executor=context.executor,
        tune=step.get("tuning"),
    )
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    resumed = getattr(result.run, "resumed_draws", None)
    if resumed is not None and resumed.any():
        print(f"  resumed from checkpoints: draws per chain taken from them {resumed.tolist()}")
    saved, metrics = write_result(result, folder / "posterior.nc", folder / "metrics.json")
    stop_if_rescued(saved, step)
    if metrics is None:
        print(f"  interrupted: wrote {saved.path}")
        return {"result": result, "fit": result.run, "metrics": {"interrupted": True}}
    (folder / "statistics.json").write_text(json_text(kernel_statistics(result), indent=1))
    table = result.summary().to_string()
    (folder / "summary.txt").write_text(table + "\n")
    print(table)
    print(
        f"  {metrics['sampler']}: ESS bulk min {metrics['ess_bulk_min']:.0f}, "
        f"tail min {metrics['ess_tail_min']:.0f}, "
        f"R-hat max {metrics['rhat_max']:.3f}, {metrics['wall_seconds']:.2f} s, "
        f"{metrics['ess_per_second']:.3g} ESS/s (min of bulk and tail)"
        f"{'' if metrics['converged'] else ' (UNRELIABLE: NOT CONVERGED)'} -> {folder}"
    )
    print_warnings(metrics)
    out = {"result": result, "metrics": metrics}
    if method_spec(result.method).stan_nuts:
        out["fit"] = result.run  # a later step's warmup_from
    return out


def stop_if_rescued(saved: Written, step: dict[str, Any]) -> None:
    """Stop the workflow where a step's draws could not be written in its folder (a full disk).

    They are in a rescue file by then (:func:`stanaccel.diagnostics.files.write_or_rescue`);
    the message says where, and what running the workflow again does.

    Raises
    ------
    OutputFailed
        ``saved`` went to a rescue file.
    """
    if saved.rescued:
        raise OutputFailed(
            f"step {step['name']!r}: could not write {saved.asked} ({saved.problem}); its draws are in "
            f"{saved.path}. Make room (or mend the folder) and run the workflow again: the steps done "
            "are loaded, and this one runs again"
        )


def print_warnings(metrics: dict[str, Any]) -> None:
    """A step's kernel statistics and its WARNING block, if any, on the console."""
    from stanaccel.diagnostics.metrics import statistics_lines, warning_block

    for line in statistics_lines(metrics, indent="  "):
        print(line)
    block = warning_block(metrics, indent="  ")
    if block:
        print(block, flush=True)


def kernel_statistics(result: SampleResult) -> dict[str, Any]:
    """What the sampler's kernels and autoencoder recorded, JSON-ready.

    ``chains``: each chain's kernel summary (none for Stan NUTS), without the
    tempering replicas' positions; ``autoencoder``: latent dimension, epochs,
    training time and reconstruction error, for the latent methods.
    """
    chains = [
        {k: v for k, v in summary.items() if k != "replicas"}
        for summary in result.reports.get("summaries", [])
        if isinstance(summary, dict)
    ]
    out = {"chains": chains}
    if "autoencoder" in result.reports:
        out["autoencoder"] = result.reports["autoencoder"]
    return json.loads(json.dumps(jsonable(out), default=str))
