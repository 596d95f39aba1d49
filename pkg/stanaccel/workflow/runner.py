"""Load a workflow file and run its steps, each step's output feeding later ones.

A workflow file (TOML) has a ``[workflow]`` table (``name``, ``seed``,
``output``, and ``executor``: where independent sampler runs go, see
:func:`stanaccel.executors.executor_from`) and a list of ``[[steps]]``,
each with a unique ``name`` and an ``action`` from
:data:`stanaccel.workflow.steps.ACTIONS`. A step refers to an
earlier step's output by that step's name (for example ``data = "data"``).
Every step gets a seed derived from the workflow seed and its name unless it
sets ``seed``, so a workflow file reproduces its run exactly. The output
folder receives a copy of the workflow file, ``run.json`` (versions, seeds,
timings, and each step's status) and one subfolder per step. Ctrl-C stops
the running step, which keeps its partial outputs; the workflow then stops
with :class:`~stanaccel.workflow.interrupts.WorkflowInterrupted` and
``run.json`` names the interrupted step.
"""

from __future__ import annotations

import json
import platform
import shutil
import time
import tomllib
from pathlib import Path
from typing import Any

from stanaccel.diagnostics.files import check_writable
from stanaccel.executors import Executor, check_spec, executor_from
from stanaccel.workflow.context import RunContext, Workflow
from stanaccel.workflow.interrupts import InterruptWatch, WorkflowInterrupted
from stanaccel.workflow.steps import ACTIONS


def load_workflow(path: str | Path, *, output: str | Path | None = None) -> Workflow:
    """Parse a workflow file and check all of it before anything runs; ``output`` overrides its output folder.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Not valid TOML, or a table, key or value that is not what it should be
        (:func:`stanaccel.workflow.validation.check_workflow` names the file, step and key).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"workflow file not found: {path}")
    with open(path, "rb") as handle:
        try:
            config = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    from stanaccel.workflow.validation import check_workflow

    check_workflow(config, path)
    head = config.get("workflow", {})
    name = head.get("name", path.stem)
    out = Path(output) if output is not None else Path(head.get("output", f"output/{name}"))
    seed, steps = head.get("seed", 0), config["steps"]
    return Workflow(
        name=name, seed=seed, output=out, steps=steps, source=path.resolve(), executor=head.get("executor")
    )


def run_workflow(
    workflow: Workflow | str | Path,
    *,
    output: str | Path | None = None,
    seed: int | None = None,
    progress: bool = True,
    executor: Executor | str | None = None,
) -> RunContext:
    """Run every step in order; return the context holding each step's outputs.

    ``output``, ``seed`` and ``executor`` override the file's ``[workflow]``
    values (every step's seed derives from the workflow seed unless the step
    sets its own). An executor named by text (here or in the file) is started
    before the first step and closed after the last; an Executor passed in is
    the caller's to close. The results do not depend on the executor.
    """
    if not isinstance(workflow, Workflow):
        workflow = load_workflow(workflow, output=output)
    elif output is not None:
        workflow.output = Path(output)
    if seed is not None:
        if not 0 <= int(seed) < 2**63:
            raise ValueError(f"seed must be a non-negative integer below 2**63, not {seed}")
        workflow.seed = int(seed)
    if executor is None:
        executor = workflow.executor
    if isinstance(executor, str):
        check_spec(executor)
    check_writable(workflow.output / "run.json")
    if workflow.source is not None:
        shutil.copyfile(workflow.source, workflow.output / "workflow.toml")
    if isinstance(executor, Executor):
        return _run_steps(
            workflow, RunContext(workflow, workflow.output, progress=progress, executor=executor)
        )
    with executor_from(executor) as made:
        return _run_steps(workflow, RunContext(workflow, workflow.output, progress=progress, executor=made))


def _run_steps(workflow: Workflow, context: RunContext) -> RunContext:
    record: dict[str, Any] = {
        "workflow": workflow.name,
        "seed": workflow.seed,
        "executor": repr(context.executor),
        "versions": _versions(),
        "status": "running",
        "steps": [],
    }
    for step in workflow.steps:
        start = time.perf_counter()
        seed = context.step_seed(step)
        print(f"[{workflow.name}] step {step['name']} ({step['action']}), seed {seed}", flush=True)
        entry = {"name": step["name"], "action": step["action"], "seed": seed}
        watch = InterruptWatch()
        try:
            with watch.watching():
                context.results[step["name"]] = ACTIONS[step["action"]](step, context, seed)
        except BaseException as exc:
            if not (watch.seen or isinstance(exc, KeyboardInterrupt)):
                raise
            _record_stop(record, entry, start, workflow.output)
            raise WorkflowInterrupted(_stop_message(step, workflow.output)) from exc
        if watch.seen:
            _record_stop(record, entry, start, workflow.output)
            raise WorkflowInterrupted(_stop_message(step, workflow.output))
        record["steps"].append({**entry, "status": "done", "seconds": time.perf_counter() - start})
        (workflow.output / "run.json").write_text(json.dumps(record, indent=2))
    record["status"] = "done"
    (workflow.output / "run.json").write_text(json.dumps(record, indent=2))
    return context


def _record_stop(record: dict[str, Any], entry: dict[str, Any], start: float, output: Path) -> None:
    """Write ``run.json`` saying that this step was interrupted and the workflow stopped there."""
    record["steps"].append({**entry, "status": "interrupted", "seconds": time.perf_counter() - start})
    record["status"] = "interrupted"
    record["interrupted_step"] = entry["name"]
    (output / "run.json").write_text(json.dumps(record, indent=2))


def _stop_message(step: dict[str, Any], output: Path) -> str:
    return (
        f"step {step['name']!r} stopped by Ctrl-C; its partial outputs are in {output / step['name']}, "
        f"later steps did not run, and {output / 'run.json'} records the stop"
    )


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for package in ("stanaccel", "httpstan", "numpy", "scipy", "arviz", "cmdstanpy"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = "not installed"
    return versions
