"""One self-contained HTML page of a workflow run: :func:`write_report`.

The page (``report.html`` in the run's output folder) opens in any browser
without a network: its figures are PNG data URIs, its style is inline CSS,
and it has no scripts, fonts or links to anywhere. It holds

- the run: workflow, status (a run in progress, killed, interrupted or
  failed is said so: :func:`run_state`), versions, each step's status and time;
- **ESS per second against Stan NUTS**: every sampler step's bulk ESS per
  second with the warm-up, training and tuning charged and without, its
  ratio to the run's Stan NUTS step, worst R-hat, measured bias, a bar
  chart, and the worst bulk ESS and R-hat against wall time of all of them
  in one figure; then the study tables' rows of the same figures;
- one section per sampler step (``nuts``, ``sample``): the metrics, the
  kernel statistics where the sampler records them (tempering swap
  acceptance and round trips, the discretizing chain's mark acceptance and
  cache hits, the autoencoder's reconstruction error), the ArviZ summary,
  trace and rank plots of the first parameters, and R-hat and ESS against
  wall time; approximate samplers are flagged, with their bias measured
  against the run's NUTS step, and so are runs that have not converged (R-hat,
  ESS, divergences, tree depth: :func:`~stanaccel.diagnostics.convergence_warnings`)
  or whose kernel statistics say they mix poorly, their ESS per second marked
  unreliable;
- one section per study step: its tables (approximate samplers' rows
  marked) and its figures.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import write_bytes
from stanaccel.diagnostics import figures
from stanaccel.diagnostics._arviz import az
from stanaccel.diagnostics.metrics import (
    INNER_ACCEPTANCE_MIN,
    METHOD_STATISTICS,
    REJECTED_LABEL,
    SWAP_ACCEPTANCE_MIN,
    combined_statistics,
    evidence_rows,
    judge,
    reference_z_scores,
    shown_number,
    summary,
)
from stanaccel.diagnostics.prefixes import convergence_by_prefix

SUMMARY_ROWS = 20  # rows of the ArviZ summary shown per sampler
CSV_ROWS = 40  # rows of a study's CSV-only table shown
NUTS_METHODS = ("stan_nuts", "nuts")
BIAS_COLUMNS = ("z_max", "mean_error_sd", "sd_ratio_min", "sd_ratio_max", "predictive_error_max")


RUN_LOCK = ".stanaccel-run.lock"
"""The file in an output folder that a run holds locked while it runs, naming its process id
(:func:`stanaccel.workflow.runner.output_lock`): removed when the run ends, left unlocked by a killed one."""
RUN_KEYS = ("workflow", "status", "steps")
"""The keys every ``run.json`` of a stanaccel run has."""
NUMBERS = (
    "ess_bulk_min", "ess_tail_min", "ess_min", "rhat_max", "wall_seconds", "sampling_seconds",
    "ess_per_second", "ess_per_second_sampling", "acceptance", "evaluations", "gradient_evaluations",
    "divergences", "max_tree_depth_hits", "rejected_by_program", "chains", "draws_per_chain",
)  # fmt: skip
"""The metrics the page reads as numbers: another value in ``metrics.json`` makes it unreadable."""


@dataclass(frozen=True)
class Report:
    """A written report: its file, the steps it left out (each with a sentence naming the file and why),
    and ``state``: a sentence on a run not done (in progress, killed, interrupted, failed), or ""."""

    path: Path
    left_out: dict[str, str]
    state: str = ""


class UnreadableOutput(ValueError):
    """A step's output file is there but cannot be read: not JSON, not netCDF, cut short."""


def write_report(output_dir: str | Path, path: str | Path | None = None) -> Path:
    """Write the HTML report of a workflow output folder; return its path.

    :func:`report` does the same and also says which steps it left out.
    """
    return report(output_dir, path).path


def report(output_dir: str | Path, path: str | Path | None = None) -> Report:
    """Write the HTML report of a workflow output folder.

    A step whose outputs are missing or cannot be read is left out, with a
    line on the page naming the file and why.

    Parameters
    ----------
    output_dir : path
        A folder written by ``stanaccel run``: ``run.json`` and one folder per step.
    path : path, optional
        The HTML file to write; default ``output_dir / "report.html"``.

    Raises
    ------
    FileNotFoundError
        ``output_dir`` is not a folder or holds no ``run.json`` (where a run
        there has not finished its first step yet, the message says so).
    ValueError
        ``run.json`` is not a run's record, or names a step folder outside
        ``output_dir``; ``path`` is a folder, does not end in ``.html``, or is
        a file that is not a page stanaccel wrote (a run's ``posterior.nc``).
    """
    output_dir = Path(output_dir)
    run = _read_run(_run_file(output_dir))
    path = Path(path) if path is not None else output_dir / "report.html"
    check_target(path)
    steps = [s for s in run.get("steps", []) if s.get("action") != "report"]
    missing = missing_outputs(output_dir, run)
    unreadable: dict[str, str] = {}
    samplers = []
    for step in steps:
        if _is_sampler(output_dir / step["name"]):
            with _leaving_out(step, unreadable, output_dir):
                samplers.append(_load_sampler(output_dir / step["name"], step))
    samplers = [s for s in samplers if s is not None]
    nuts = next((s for s in samplers if s["is_nuts"]), None)
    for sampler in samplers:
        _compare_with_nuts(sampler, nuts)
    studies = []
    for step in steps:
        if (
            step.get("action") != "generate"
            and not _is_sampler(output_dir / step["name"])
            and step["name"] not in missing
        ):
            with _leaving_out(step, unreadable, output_dir):
                studies.append(_load_study(output_dir / step["name"], step))
    state = run_state(output_dir, run)
    shown = list(steps)
    if state and run.get("status") == "running" and run.get("running_step"):
        doing = "running" if state.startswith("run in progress") else "killed while running"
        shown.append({**STEP_DEFAULTS, "name": run["running_step"], "status": doing})
    html = _render(
        {
            "run": run,
            "state": state,
            "output_dir": str(output_dir),
            "steps": shown,
            "missing": list(missing.values()),
            "unreadable": list(unreadable.values()),
            "samplers": samplers,
            "nuts": nuts,
            "overview": _overview(samplers, nuts),
            "study_rows": _study_efficiency_rows(studies),
            "studies": [s for s in studies if s["tables"] or s["images"]],
            "max_plotted": figures.MAX_PLOTTED,
            "summary_rows": SUMMARY_ROWS,
        }
    )
    write_bytes(path, html.encode("utf-8"))  # whole or not at all: a stopped write leaves the last page
    return Report(path, {**missing, **unreadable}, state)


def check_target(path: Path) -> None:
    """Refuse a report's file that is a folder, does not end in ``.html``, or is another file than a
    report page: a run's ``posterior.nc`` or ``run.json`` would be lost under the page.

    Raises
    ------
    ValueError
        Naming the path and what to give instead.
    """
    if path.is_dir():
        raise ValueError(f"{path} is a folder: give the report's file name, such as {path / 'report.html'}")
    if path.suffix != ".html":
        raise ValueError(f"{path}: the report is an HTML page: give a file name ending in .html")
    if path.exists() and not is_report(path):
        raise ValueError(
            f"{path} exists and is not a report page that stanaccel wrote, and the report would overwrite "
            "it: give another file name"
        )


def is_report(path: Path) -> bool:
    """Whether ``path`` is a page that :func:`report` wrote (its title says so)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return b"<title>stanaccel report: " in head


def run_state(output_dir: Path, run: dict[str, Any]) -> str:
    """A sentence on a run that ``run.json`` does not record as done, or "" for a done run (or a run
    whose report step is writing this page).

    A run records ``running`` (and the step it runs) while it runs, and holds
    its lock file (:data:`RUN_LOCK`, which names its process id) locked: where
    the lock is free, the run was killed (SIGKILL, a power cut) before it
    could record its end.
    """
    status, step = run.get("status"), run.get("running_step")
    if status == "interrupted":
        return (
            f"the run was interrupted during step {run.get('interrupted_step')!r}: run the workflow again to "
            "continue it (its later steps did not run)"
        )
    if status == "failed":
        name = run.get("failed_step")
        failed = next((s for s in run["steps"] if s.get("status") == "failed"), {})
        error = str(failed.get("error", "no error recorded")).removeprefix(f"step {name!r}: ")
        return f"the run failed at step {name!r}: {error}"
    if status != "running":
        return ""
    held, pid = _lock_state(output_dir / RUN_LOCK)
    if held:
        if pid == str(os.getpid()):
            return ""  # a report step of the run itself
        during = f", step {step!r}" if step else ""
        return (
            f"run in progress (pid {pid}{during}): the page covers the steps done so far; report again when "
            "it ends"
        )
    where = f" during step {step!r}" if step else ""
    if not (output_dir / RUN_LOCK).exists():  # a run that ended removed it, but could not record how
        return (
            f"the run is no longer running, and ended{where} without recording how (a full disk? its "
            "console said why); run the workflow again to continue"
        )
    who = f" (pid {pid})" if pid else ""
    return f"the run{who} is no longer running: it was killed{where}; run the workflow again to continue"


def _lock_state(lock: Path) -> tuple[bool, str]:
    """Whether a run holds ``lock`` locked, and the process id it names ("" where none)."""
    try:
        handle = open(lock)  # noqa: SIM115 (closed below)
    except OSError:
        return False, ""
    with handle:
        pid = handle.read().strip()
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True, pid
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False, pid


def run_record_problem(run_file: Path) -> str | None:
    """Why ``run_file`` is not the ``run.json`` of a stanaccel run (not JSON, not a table of its keys),
    or None."""
    try:
        run = json.loads(run_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"it is not valid JSON: {error}"
    if not isinstance(run, dict) or any(key not in run for key in RUN_KEYS):
        return f"it is not a table with the keys {', '.join(RUN_KEYS)}"
    if not isinstance(run["steps"], list):
        return "its steps are not a list"
    return None


SAMPLER_ACTIONS = ("nuts", "sample")
SAMPLER_FILES = ("posterior.nc", "metrics.json")


@contextlib.contextmanager
def _leaving_out(step: dict[str, Any], unreadable: dict[str, str], output_dir: Path) -> Iterator[None]:
    """Record a step whose files cannot be read (:class:`UnreadableOutput`), or hold values of kinds
    stanaccel does not write (a text where a number goes), as left out, and go on."""
    try:
        yield
    except UnreadableOutput as error:
        why = str(error)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as error:
        why = (
            f"the files in {output_dir / step['name']} hold values stanaccel did not write there ({error!r})"
        )
    else:
        return
    unreadable[step["name"]] = (
        f"step {step['name']!r} is left out: {why}; delete it and run the workflow again to write it"
    )


def _run_file(output_dir: Path) -> Path:
    """``output_dir / "run.json"``; FileNotFoundError saying why where it is not there."""
    run_file = output_dir / "run.json"
    if output_dir.is_file():
        raise NotADirectoryError(
            f"{output_dir} is a file, not an output folder: give the output folder of `stanaccel run`"
            + _workflow_output(output_dir)
        )
    if not output_dir.is_dir():
        raise FileNotFoundError(f"output folder not found: {output_dir}")
    if not run_file.is_file() and (output_dir / "workflow.toml").is_file():
        raise FileNotFoundError(
            f"{output_dir} holds no run.json yet: the workflow run there has not finished its first step "
            "(it is still running, or it was stopped before that step was done); run.json is written "
            "when a step is done: report again then, or, if the run was stopped, run the workflow again "
            "to continue it"
        )
    if not run_file.is_file():
        raise FileNotFoundError(f"{output_dir} holds no run.json; give the output folder of `stanaccel run`")
    return run_file


def _workflow_output(path: Path) -> str:
    """Where a workflow file writes its run (" (that workflow's is OUT)"), for a message; "" where
    ``path`` is no workflow file naming one."""
    import tomllib

    try:
        output = tomllib.loads(path.read_text(encoding="utf-8")).get("workflow", {}).get("output")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return ""
    if not isinstance(output, str) or not output:
        return ""
    return f" (the workflow {path} writes its run in {output})"


def _read_run(run_file: Path) -> dict[str, Any]:
    """``run.json`` of an output folder; a ValueError naming the file where it is not a run's record.

    Each step's name must be a folder of the output folder: the report reads
    ``<output>/<name>``, and a name such as ``../x`` would read elsewhere.
    """
    try:
        run = json.loads(run_file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{run_file} is not valid JSON ({error}); run the workflow again to rewrite it"
        ) from None
    if not isinstance(run, dict) or not isinstance(run.get("steps", []), list):
        raise ValueError(f"{run_file} is not the record of a stanaccel run (expected a table with 'steps')")
    for step in run.get("steps", []):
        name = step.get("name") if isinstance(step, dict) else None
        if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name or "\\" in name:
            raise ValueError(
                f"{run_file} is not the record of a stanaccel run: step name {name!r} is not a folder "
                "of the output folder"
            )
        for key, value in STEP_DEFAULTS.items():  # a record cut short, or of an older stanaccel
            step.setdefault(key, value)
    run.setdefault("workflow", run_file.parent.name)
    run.setdefault("status", "not recorded")
    run.setdefault("seed", None)
    return run


STEP_DEFAULTS = {"action": "", "status": "not recorded", "seed": None, "seconds": None, "cached": False}
"""What the page shows of a step whose entry in ``run.json`` lacks a key."""


def _read_json(path: Path) -> Any:
    """What a JSON file of a step holds; :class:`UnreadableOutput` naming the file where it is not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableOutput(f"{path} is not valid JSON ({error})") from None


def _read_netcdf(path: Path) -> az.InferenceData:
    """A step's InferenceData, read whole now; :class:`UnreadableOutput` naming the file where it can't be."""
    try:
        with az.rc_context({"data.load": "eager"}):  # a file cut short fails here, not in a later figure
            return az.from_netcdf(str(path))
    except Exception as error:  # HDF5, netCDF4 and xarray each raise their own on a damaged file
        raise UnreadableOutput(
            f"{path} is not a readable netCDF file ({type(error).__name__}: {error})"
        ) from None


def missing_outputs(output_dir: str | Path, run: dict[str, Any] | None = None) -> dict[str, str]:
    """Sampler steps that ``run.json`` records as done but whose outputs are gone, each with a sentence.

    The report leaves such a step out and says so; ``stanaccel run`` on the
    workflow writes its outputs again.
    """
    output_dir = Path(output_dir)
    run = run if run is not None else _read_run(output_dir / "run.json")
    missing = {}
    for step in run.get("steps", []):
        if step.get("status") != "done" or step.get("action") not in SAMPLER_ACTIONS:
            continue
        gone = [
            output_dir / step["name"] / f
            for f in SAMPLER_FILES
            if not (output_dir / step["name"] / f).is_file()
        ]
        if gone:
            missing[step["name"]] = (
                f"step {step['name']!r} is left out: {', '.join(map(str, gone))} "
                f"{'is' if len(gone) == 1 else 'are'} missing (rerun the workflow to write it again)"
            )
    return missing


def _is_sampler(folder: Path) -> bool:
    return (folder / "posterior.nc").is_file() and (folder / "metrics.json").is_file()


def _load_sampler(folder: Path, step: dict[str, Any]) -> dict[str, Any] | None:
    """A sampler step's metrics, statistics, summary and figures."""
    metrics = _read_json(folder / "metrics.json")
    if not isinstance(metrics, dict):
        raise UnreadableOutput(f"{folder / 'metrics.json'} is not a table of metrics")
    if metrics.get("interrupted"):
        return None
    if "ess_bulk_min" not in metrics:
        raise UnreadableOutput(f"{folder / 'metrics.json'} is not the metrics of a sampler (no ess_bulk_min)")
    for key in NUMBERS:
        value = metrics.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UnreadableOutput(
                f"{folder / 'metrics.json'} holds {key} = {value!r}, which is not a number"
            )
    if not isinstance(metrics.get("warnings", []), list):
        raise UnreadableOutput(f"{folder / 'metrics.json'} holds warnings that are not a list")
    idata = _read_netcdf(folder / "posterior.nc")
    method = metrics.get("method", "")
    is_nuts = method in NUTS_METHODS
    wall = float(metrics.get("wall_seconds", float("nan")))
    sampling = metrics.get("sampling_seconds")
    if sampling is None and is_nuts:
        sampling = wall * _nuts_sampling_share(idata)
    sampling = float(sampling) if sampling is not None else wall
    table = summary(idata)
    prefix = convergence_by_prefix(idata, wall_seconds=wall, sampling_seconds=sampling)
    ess_sampling = metrics.get(
        "ess_per_second_sampling", metrics.get("ess_min", metrics["ess_bulk_min"]) / sampling
    )
    if "warnings" not in metrics:  # written before stanaccel judged convergence
        judge(metrics)
    statistics, levels = _kernel_statistics(folder / "statistics.json", metrics.get("schedule"))
    return {
        "step": step["name"],
        "action": step.get("action", ""),
        "method": method,
        "sampler": metrics.get("sampler") or idata.posterior.attrs.get("sampler", method),
        "exact": bool(metrics.get("exact", True)),
        "is_nuts": is_nuts,
        "program": metrics.get("program", ""),
        "chains": metrics.get("chains"),
        "draws": metrics.get("draws_per_chain"),
        "idata": idata,
        "ess_per_second": metrics.get("ess_per_second", float("nan")),
        "ess_per_second_sampling": ess_sampling,
        "rhat_max": metrics.get("rhat_max"),
        "converged": bool(metrics["converged"]),
        "warnings": list(metrics["warnings"]),
        "metrics": _metric_rows(metrics, idata, wall, sampling, ess_sampling),
        "statistics": statistics + evidence_rows(metrics),
        "levels": levels,
        "auto": _auto_table(metrics.get("auto")),
        "schedule": _schedule_table(metrics.get("schedule")),
        "modes": (metrics.get("modes") or {}).get("message", ""),
        "summary_html": table.head(SUMMARY_ROWS).to_html(classes="summary", float_format=_format, border=0),
        "summary_truncated": len(table) > SUMMARY_ROWS,
        "summary_size": len(table),
        "prefix": prefix,
        "trace": figures.data_uri(figures.trace_figure(idata)),
        "rank": figures.data_uri(figures.rank_figure(idata)),
        "plotted": figures.plotted_coords(idata)[1],
    }


def _metric_rows(
    metrics: dict[str, Any], idata, wall: float, sampling: float, ess_sampling: float
) -> list[tuple[str, Any]]:
    """The rows of a sampler step's metrics table: ESS, R-hat, times and charges, ESS per second (marked
    unreliable where the run has not converged), acceptance, evaluations, divergences, proposals the
    program rejected and transitions at the largest tree depth."""
    unreliable = "" if metrics["converged"] else " (unreliable: not converged)"
    charged = metrics.get("charged_seconds") or {}
    return [
        ("ESS bulk (worst parameter)", metrics.get("ess_bulk_min")),
        ("ESS tail (worst parameter)", metrics.get("ess_tail_min")),
        ("R-hat (worst parameter)", metrics.get("rhat_max")),
        ("wall time (s), all charges included", wall),
        ("sampling time (s)", sampling),
        *[(f"charged: {k} (s)", v) for k, v in charged.items()],
        (
            "ESS (min of bulk and tail) per second, charges included" + unreliable,
            metrics.get("ess_per_second"),
        ),
        ("ESS (min of bulk and tail) per second, sampling only" + unreliable, ess_sampling),
        ("acceptance (mean)", metrics.get("acceptance", _mean_acceptance(idata))),
        ("evaluations", metrics.get("evaluations", metrics.get("gradient_evaluations"))),
        *([("divergences", metrics["divergences"])] if "divergences" in metrics else []),
        *([(REJECTED_LABEL, metrics["rejected_by_program"])] if metrics.get("rejected_by_program") else []),
        *(
            [
                (
                    f"transitions at the largest tree depth ({metrics.get('max_depth')})",
                    metrics["max_tree_depth_hits"],
                )
            ]
            if "max_tree_depth_hits" in metrics
            else []
        ),
    ]


AUTO_COLUMNS = (
    ("method", "method"),
    ("warmup", "warm-up"),
    ("warmup_s", "warm-up (s)"),
    ("setup_s", "set-up (s)"),
    ("pilot_ess_per_draw", "pilot ESS/draw"),
    ("s_per_draw", "s/draw"),
    ("pilot_s", "pilot (s)"),
    ("projected_ess_per_s", "projected ESS/s"),
    ("slowest", "slowest"),
    ("chosen", "chosen"),
    ("note", "note"),
)


def _auto_table(auto: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pilot table of a ``method = "auto"`` step (its metrics' ``auto``), with the reason and formula."""
    if not auto:
        return None
    return {
        "columns": [label for _, label in AUTO_COLUMNS],
        "rows": [[_format(row.get(key)) for key, _ in AUTO_COLUMNS] for row in auto.get("pilots", [])],
        "reason": auto.get("reason", ""),
        "formula": auto.get("formula", ""),
        "funnel": (auto.get("funnel") or {}).get("message", ""),
    }


SCHEDULE_COLUMNS = (
    "scans", "levels", "barrier", "largest rejection", "round trips", "per scan", "in theory",
    "inner acceptance",
)  # fmt: skip


def _schedule_table(schedule: dict[str, Any] | None) -> dict[str, Any] | None:
    """The rounds that placed a tempering ladder (its metrics' ``schedule``), one row each, and the ladder."""
    if not schedule:
        return None
    rows = [
        [r["scans"], len(r["betas"]), _format(r["barrier"]), _format(max(r["rejection"])), r["round_trips"],
         _format(r["round_trip_rate"]), _format(r["theoretical_rate"]), _acceptance_range(r)]
        for r in schedule.get("rounds", [])
    ]  # fmt: skip
    return {
        "columns": list(SCHEDULE_COLUMNS),
        "rows": rows,
        "betas": " ".join(f"{b:.3g}" for b in schedule["betas"]),
        "barrier": _format(schedule["barrier"]),
        "pilots": [
            f"{p['levels']} levels over {p['span']:.0%} of the barrier accepted {p['acceptance']:.3f}"
            for p in schedule.get("trajectory_pilot", [])
        ],
        "note": schedule.get("note", ""),
    }


def _acceptance_range(round_: dict[str, Any]) -> str:
    """The levels' inner acceptance in a round, lowest to highest (blank where the steps were not adapted)."""
    accepted = round_.get("inner_acceptance")
    return f"{min(accepted):.2f} to {max(accepted):.2f}" if accepted else ""


def _compare_with_nuts(sampler: dict[str, Any], nuts: dict[str, Any] | None) -> None:
    """Ratios to the NUTS step's ESS per second, the bias against its draws, the convergence figure."""
    sampler["vs_nuts"] = sampler["vs_nuts_sampling"] = sampler["z_max"] = None
    traces = [{"label": sampler["sampler"], **sampler["prefix"]}]
    if nuts is not None and nuts is not sampler:
        sampler["vs_nuts"] = sampler["ess_per_second"] / nuts["ess_per_second"]
        sampler["vs_nuts_sampling"] = sampler["ess_per_second_sampling"] / nuts["ess_per_second_sampling"]
        try:
            z = np.abs(reference_z_scores(sampler["idata"], nuts["idata"]))
            sampler["z_max"] = float(np.max(z)) if z.size else None
        except (KeyError, ValueError):  # different parameters: nothing to compare
            sampler["z_max"] = None
        traces.append({"label": f"Stan NUTS ({nuts['step']})", "reference": True, **nuts["prefix"]})
    sampler["convergence"] = figures.data_uri(figures.convergence_figure(traces))


def _overview(samplers: list[dict[str, Any]], nuts: dict[str, Any] | None) -> dict[str, Any]:
    """The summary section's rows, bar chart and joint convergence figure."""
    if not samplers:
        return {"rows": [], "bars": None, "convergence": None}
    traces = [
        {"label": f"{s['step']}: {s['sampler']}", "reference": s["is_nuts"], **s["prefix"]} for s in samplers
    ]
    return {
        "rows": samplers,
        "bars": figures.data_uri(figures.ess_per_second_figure(samplers)),
        "convergence": figures.data_uri(figures.convergence_figure(traces)),
    }


def _nuts_sampling_share(idata) -> float:
    """The sampling phase's share of a Stan NUTS run's gradient evaluations (its warm-up's is the rest)."""
    try:
        kept = float(idata.sample_stats["n_steps"].sum())
        warmup = float(idata.warmup_sample_stats["n_steps"].sum())
    except (AttributeError, KeyError):
        return 1.0
    return kept / (kept + warmup) if kept + warmup > 0 else 1.0


def _mean_acceptance(idata) -> float | None:
    try:
        return float(idata.sample_stats["acceptance_rate"].mean())
    except (AttributeError, KeyError):
        return None


LEVEL_STATISTICS = {  # a kernel statistic with a value per level (or pair of levels) -> its column
    "betas": "beta",
    "inner_acceptance": "inner acceptance",
    "swap_acceptance": "swap acceptance with the next level",
}
LEVEL_ROWS = 30  # rows of one table of the levels; a longer ladder is cut into tables side by side


def _kernel_statistics(
    path: Path, schedule: dict[str, Any] | None = None
) -> tuple[list[tuple[str, Any]], dict[str, Any] | None]:
    """Rows of what the kernels and the autoencoder recorded (``statistics.json`` of a sample step),
    and the tempering ladder's values per level (:func:`_levels_table`), taken out of those rows."""
    if not path.is_file():
        return [], _levels_table({}, schedule)
    recorded = _read_json(path)
    if not isinstance(recorded, dict):
        raise UnreadableOutput(f"{path} is not a table of kernel statistics")
    chains = recorded.get("chains", [])
    per_chain = {key: [c[key] for c in chains if c.get(key) is not None] for key in METHOD_STATISTICS}
    levels = _levels_table(per_chain, schedule)
    if levels is not None:
        per_chain = {k: v for k, v in per_chain.items() if k not in levels["keys"]}
    rows = [
        (label, " ".join(_format(v) for v in value) if isinstance(value, list) else value)
        for label, value in combined_statistics(per_chain)
    ]
    autoencoder = recorded.get("autoencoder")
    if autoencoder:
        reconstruction = autoencoder.get("reconstruction", {})
        rows += [
            (
                "autoencoder: architecture, latent dimension",
                f"{autoencoder.get('architecture')}, {autoencoder.get('latent_dim')}",
            ),  # fmt: skip
            (
                "autoencoder: epochs, training time (s)",
                f"{autoencoder.get('epochs')}, {_format(autoencoder.get('training_seconds'))}",
            ),  # fmt: skip
            ("reconstruction error (RMSE, standardised scale)", reconstruction.get("rmse")),
            ("reconstruction: explained variance", reconstruction.get("explained_variance")),
        ]
    return rows, levels


def _levels_table(per_chain: dict[str, list], schedule: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tempering ladder level by level: beta, inner acceptance and swap acceptance with the next
    level (means over chains), and the inner step's factor where the schedule adapted it; None
    without a ladder.

    One row per level rather than a line of 60 numbers a statistic, which would run off the page;
    the rows are cut into tables of at most :data:`LEVEL_ROWS`, which the page sets side by side.
    ``keys``: the kernel statistics shown here, left out of the other rows. Values below
    :data:`SWAP_ACCEPTANCE_MIN` and :data:`INNER_ACCEPTANCE_MIN` are marked ``low``.
    """
    combined = {
        key: combined_statistics({key: per_chain[key]})[0][1]
        for key in LEVEL_STATISTICS
        if per_chain.get(key)
    }
    schedule = schedule or {}
    if "betas" not in combined and schedule.get("betas"):
        combined["betas"] = list(schedule["betas"])
    vectors = {k: v for k, v in combined.items() if isinstance(v, list) and v}
    if "betas" in vectors:
        size = len(vectors["betas"])
    elif "inner_acceptance" in vectors:
        size = len(vectors["inner_acceptance"])
    elif "swap_acceptance" in vectors:
        size = len(vectors["swap_acceptance"]) + 1
    else:
        return None
    expected = {"betas": size, "inner_acceptance": size, "swap_acceptance": size - 1}
    keys = [k for k in LEVEL_STATISTICS if k in vectors and len(vectors[k]) == expected[k]]
    columns = ["level", *(LEVEL_STATISTICS[k] for k in keys)]
    factors = schedule.get("step_factors")
    factors = factors if factors and len(factors) == size else None
    if factors:
        columns.append("inner step factor")
    floors = {"inner_acceptance": INNER_ACCEPTANCE_MIN, "swap_acceptance": SWAP_ACCEPTANCE_MIN}
    rows = []
    for level in range(size):
        cells = [{"text": str(level), "low": False}]
        for key in keys:
            value = vectors[key][level] if level < len(vectors[key]) else None
            low = value is not None and key in floors and value < floors[key]
            cells.append({"text": _format(value if value is None else float(value)), "low": low})
        if factors:
            cells.append({"text": _format(float(factors[level])), "low": False})
        rows.append(cells)
    parts = -(-size // LEVEL_ROWS)
    length = -(-size // parts)  # balanced: 61 levels are 3 tables of 21, 21 and 19, not 30, 30 and 1
    return {
        "keys": keys,
        "size": size,
        "columns": columns,
        "parts": [rows[i : i + length] for i in range(0, size, length)],
        "swap_min": SWAP_ACCEPTANCE_MIN,
        "inner_min": INNER_ACCEPTANCE_MIN,
    }


def _load_study(folder: Path, step: dict[str, Any]) -> dict[str, Any]:
    """A study step's tables (Markdown columns over the JSON rows; other CSVs) and PNG figures."""
    tables = []
    if folder.is_dir():
        for md in sorted(folder.rglob("*.md")):
            rows_file = md.with_suffix(".json")
            if not rows_file.is_file():
                continue
            rows = _read_json(rows_file)
            if not isinstance(rows, list) or not rows:
                continue
            header = _read_text(md).splitlines()[0]
            columns = [c.strip() for c in header.strip("|").split("|")]
            tables.append(_table(md.relative_to(folder).with_suffix("").as_posix(), columns, rows))
        for csv_file in sorted(folder.rglob("*.csv")):
            if csv_file.with_suffix(".md").is_file():
                continue
            rows = list(csv.DictReader(_read_text(csv_file).splitlines()))
            if rows:
                name = csv_file.relative_to(folder).with_suffix("").as_posix()
                tables.append(_table(name, list(rows[0]), rows[:CSV_ROWS], total=len(rows)))
        for js in sorted(folder.rglob("*.json")):
            if js.with_suffix(".md").is_file():
                continue
            value = _read_json(js)
            if isinstance(value, dict) and value:
                flat = _flatten(value)
                rows = [{"key": k, "value": v} for k, v in flat.items()]
                tables.append(
                    _table(js.relative_to(folder).with_suffix("").as_posix(), ["key", "value"], rows)
                )
    images = [
        {"name": p.relative_to(folder).as_posix(), "uri": figures.png_file_uri(p)}
        for p in sorted(folder.rglob("*.png"))
    ] if folder.is_dir() else []  # fmt: skip
    return {"step": step["name"], "action": step.get("action", ""), "tables": tables, "images": images}


def _read_text(path: Path) -> str:
    """A text file of a step; :class:`UnreadableOutput` naming the file where it is not text."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnreadableOutput(f"{path} is not a readable text file ({error})") from None


def _table(name: str, columns: list[str], rows: list[dict], total: int | None = None) -> dict[str, Any]:
    """A table for the template: formatted cells, approximate samplers' rows marked."""
    has_exact = "exact" in columns or any("exact" in r for r in rows)
    return {
        "name": name,
        "columns": columns,
        "rows": [
            {
                "cells": [_format(r.get(c, "")) for c in columns],
                "approximate": _is_false(r.get("exact")),
                "unconverged": _is_false(r.get("converged")),
            }
            for r in rows
        ],
        "bias_columns": [c for c in columns if c in BIAS_COLUMNS],
        "marks_approximate": has_exact,
        "total": total if total is not None else len(rows),
        "records": rows,
    }


def _study_efficiency_rows(studies: list[dict[str, Any]]) -> dict[str, Any]:
    """Study rows that carry ESS per second (every field of the study's JSON rows), for the summary."""
    columns = ["size", "sampler", "settings", "exact", "converged", "ess_per_second",
               "ess_per_second_sampling", "vs_nuts", "vs_nuts_sampling", "rhat_max", "z_max"]  # fmt: skip
    rows = []
    for study in studies:
        for table in study["tables"]:
            for record in table["records"]:
                if "sampler" in record and "ess_per_second" in record:
                    cells = [study["step"], *(_format(record.get(c)) for c in columns)]
                    rows.append(
                        {
                            "cells": cells,
                            "approximate": _is_false(record.get("exact")),
                            "unconverged": _is_false(record.get("converged")),
                        }
                    )
    return {"columns": ["step", *columns], "rows": rows}


def _flatten(value: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            out.update(_flatten(item, name + "."))
        elif isinstance(item, list) and len(item) > 12:
            out[name] = f"{len(item)} values"
        else:
            out[name] = item if not isinstance(item, list) else " ".join(_format(v) for v in item)
    return out


def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() in ("false", "0"))


def _format(value: Any) -> str:
    """A cell: floats as :func:`shown_number` shows them, NaN and None blank."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, float | np.floating):
        return "" if math.isnan(value) else shown_number(float(value))
    if isinstance(value, str) and "." in value:  # a CSV cell
        try:
            return _format(float(value))
        except ValueError:
            return value
    return str(value)


def _render(context: dict[str, Any]) -> str:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    environment = Environment(
        loader=PackageLoader("stanaccel.diagnostics", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["num"] = _format
    return environment.get_template("report.html.j2").render(**context)
