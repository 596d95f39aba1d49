"""Load a workflow file and run its steps, each step's output feeding later ones.

A workflow file (TOML) has a ``[workflow]`` table (``name``, ``seed``,
``output``) and a list of ``[[steps]]``, each with a unique ``name`` and an
``action`` from :data:`stanaccel.workflow.actions.ACTIONS`. A step refers to an
earlier step's output by that step's name (for example ``data = "data"``).
Every step gets a seed derived from the workflow seed and its name unless it
sets ``seed``, so a workflow file reproduces its run exactly. The output
folder receives a copy of the workflow file, ``run.json`` (versions, seeds,
timings, and each step's status) and one subfolder per step, named by the
step: a plain name, checked with the rest of the file
(:func:`~stanaccel.workflow.validation.name_problem`). Before any step
runs, every Stan program file the steps name is compile-checked (stanc
only), and the output folder is locked: a second run on the same folder is
refused, naming the first one's process id. Ctrl-C stops
the running step, which keeps its partial outputs; the workflow then stops
with :class:`~stanaccel.workflow.interrupts.WorkflowInterrupted` and
``run.json`` names the interrupted step.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import tomllib
from pathlib import Path
from typing import Any

from stanaccel.atomic import exclusive_lock
from stanaccel.diagnostics.files import check_writable
from stanaccel.executors import Executor, check_spec, executor_from
from stanaccel.seeds import check_seed
from stanaccel.workflow import cache as step_cache
from stanaccel.workflow.actions import ACTIONS
from stanaccel.workflow.context import RunContext, Workflow
from stanaccel.workflow.interrupts import InterruptWatch, WorkflowInterrupted
from stanaccel.workflow.provenance import provenance, versions
from stanaccel.workflow.validation import check_programs, check_step_names, check_workflow

LOCK = ".stanaccel-run.lock"
"""The file in an output folder that a run holds locked (it names the run's process id)."""


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
    check_workflow(config, path, ACTIONS)
    head = config.get("workflow", {})
    name = head.get("name", path.stem)
    out = Path(output) if output is not None else Path(head.get("output", f"output/{name}"))
    seed, steps = head.get("seed", 0), config["steps"]
    return Workflow(
        name=name,
        seed=seed,
        output=out,
        steps=steps,
        source=path.resolve(),
        cache=head.get("cache", True),
        executor=head.get("executor"),
    )


def run_workflow(
    workflow: Workflow | str | Path,
    *,
    output: str | Path | None = None,
    seed: int | None = None,
    progress: bool = True,
    cache: bool | None = None,
    executor: Executor | str | None = None,
) -> RunContext:
    """Run every step in order; return the context holding each step's outputs.

    ``output``, ``seed`` and ``executor`` override the file's ``[workflow]``
    values (every step's seed derives from the workflow seed unless the step
    sets its own). A step already completed in ``output`` with the same key
    (its settings, seed, inputs and the stanaccel version; see
    :mod:`stanaccel.workflow.cache`) is loaded instead of run, unless
    ``cache`` is False (default: the file's ``cache``, true): then every step
    runs from nothing, its checkpoints discarded too. An executor
    named by text (here or in the file) is started before the first step and
    closed after the last; an Executor passed in is the caller's to close.
    The results do not depend on the executor.
    """
    if not isinstance(workflow, Workflow):
        workflow = load_workflow(workflow, output=output)
    elif output is not None:
        workflow.output = Path(output)
    if seed is not None:
        workflow.seed = check_seed(seed, "seed")
    use_cache = workflow.cache if cache is None else bool(cache)
    if executor is None:
        executor = workflow.executor
    if isinstance(executor, str):
        check_spec(executor)
    check_step_names(workflow.steps, workflow.source)  # a Workflow made in Python was not checked yet
    check_programs(workflow.steps, workflow.source)
    check_writable(workflow.output / "run.json")
    with output_lock(workflow.output):
        if workflow.source is not None:
            shutil.copyfile(workflow.source, workflow.output / "workflow.toml")
        if isinstance(executor, Executor):
            context = RunContext(workflow, workflow.output, progress=progress, executor=executor)
            return _run_steps(workflow, context, use_cache)
        with executor_from(executor) as made:
            context = RunContext(workflow, workflow.output, progress=progress, executor=made)
            return _run_steps(workflow, context, use_cache)


def output_lock(output: Path) -> contextlib.AbstractContextManager[None]:
    """Hold an exclusive lock on ``output`` (its file ``.stanaccel-run.lock``) while a run writes there.

    Two runs writing one folder would overwrite each other's checkpoints and
    netCDF files: the second is refused at once (:func:`stanaccel.atomic.exclusive_lock`).

    Raises
    ------
    OutputInUse
        Another run holds the lock; the message names the folder and that run's process id.
    """
    return exclusive_lock(Path(output) / LOCK, f"output folder {output}", "another output folder (--output)")


def _run_steps(workflow: Workflow, context: RunContext, use_cache: bool) -> RunContext:
    record: dict[str, Any] = {
        "workflow": workflow.name,
        "seed": workflow.seed,
        "executor": repr(context.executor),
        "versions": versions(),
        "status": "running",
        "steps": [],
    }
    keys: dict[str, str] = {}
    resolved: list[dict[str, Any]] = []
    for step in workflow.steps:
        start = time.perf_counter()
        seed = context.step_seed(step)
        key = step_cache.step_key(step, seed, context, keys)
        keys[step["name"]] = key
        resolved.append({**step, "seed": seed, "key": key})
        folder = workflow.output / step["name"]
        entry = {"name": step["name"], "action": step["action"], "seed": seed, "key": key}
        stored = (
            step_cache.load(folder, key)
            if use_cache and step["action"] not in step_cache.UNCACHED_ACTIONS
            else None
        )
        if stored is not None:
            print(
                f"[{workflow.name}] step {step['name']} ({step['action']}): unchanged, loaded from {folder}"
            )
            result, done = stored
            context.results[step["name"]] = result
            resolved[-1].update(_settings_used(result))
            record["steps"].append(
                {**entry, "status": "done", "cached": True, "seconds": done.get("seconds")}
            )
            _write(workflow.output / "run.json", record)
            continue
        print(f"[{workflow.name}] step {step['name']} ({step['action']}), seed {seed}", flush=True)
        if step["action"] not in step_cache.UNCACHED_ACTIONS:
            step_cache.start(folder, key, fresh=not use_cache)
        watch = InterruptWatch()
        try:
            with watch.watching():
                result = ACTIONS[step["action"]].run(step, context, seed)
        except BaseException as exc:
            step_cache.record_written(folder)  # so that a start afresh removes these files, not later ones
            if not (watch.seen or isinstance(exc, KeyboardInterrupt)):
                raise
            _record_stop(record, entry, start, workflow.output)
            why = str(exc) if isinstance(exc, KeyboardInterrupt) else ""
            raise WorkflowInterrupted(_stop_message(step, workflow.output, why, watch.what)) from exc
        if watch.seen:
            step_cache.record_written(folder)
            _record_stop(record, entry, start, workflow.output)
            raise WorkflowInterrupted(_stop_message(step, workflow.output, what=watch.what))
        context.results[step["name"]] = result
        resolved[-1].update(_settings_used(result))
        seconds = time.perf_counter() - start
        if step["action"] not in step_cache.UNCACHED_ACTIONS:
            step_cache.store(folder, key, result, {"name": step["name"], "seed": seed, "seconds": seconds})
        record["steps"].append({**entry, "status": "done", "cached": False, "seconds": seconds})
        _write(workflow.output / "run.json", record)
        _write(workflow.output / "provenance.json", provenance(workflow, resolved))
    record["status"] = "done"
    _write(workflow.output / "run.json", record)
    _write(workflow.output / "provenance.json", provenance(workflow, resolved))
    return context


def _settings_used(result: dict[str, Any]) -> dict[str, Any]:
    """A sampler step's settings as it ran them (tuned values filled in) and where each came from;
    for ``method = "auto"``, its pilot table and why it chose the method."""
    sampled = result.get("result")
    if sampled is None or not hasattr(sampled, "config"):
        return {}
    used = {"settings_used": sampled.config.as_dict(), "setting_sources": dict(sampled.sources)}
    if "auto" in getattr(sampled, "reports", {}):  # method = "auto": the pilots and the choice
        used["auto"] = sampled.reports["auto"]
    return used


def _write(path: Path, record: dict[str, Any]) -> None:
    path.write_text(json.dumps(record, indent=2, default=str))


def _record_stop(record: dict[str, Any], entry: dict[str, Any], start: float, output: Path) -> None:
    """Write ``run.json`` saying that this step was interrupted and the workflow stopped there."""
    record["steps"].append({**entry, "status": "interrupted", "seconds": time.perf_counter() - start})
    record["status"] = "interrupted"
    record["interrupted_step"] = entry["name"]
    _write(output / "run.json", record)


def _stop_message(step: dict[str, Any], output: Path, why: str = "", what: str = "Ctrl-C") -> str:
    """What a step stopped by a signal (``what``: "Ctrl-C", "SIGTERM") kept: draws, only its warm-up's
    checkpoint, or nothing.

    ``why`` is the interruption's own message (such as chains on worker
    processes, which return no draws when stopped).
    """
    folder = output / step["name"]
    kept = [
        folder / name
        for name in sorted(step_cache.own_files(folder))  # not a user's notes beside them
        if name not in step_cache.CACHE_FILES
    ]
    warmup = [p for p in kept if _warmup_checkpoint(p.relative_to(folder))]
    if len(warmup) < len(kept):
        where = f"its partial outputs are in {folder}"
    elif warmup:
        places = ", ".join(sorted({str(p.parent) for p in warmup}))
        where = (
            f"it kept no draws, only its warm-up's checkpoint in {places} (running the workflow again "
            "continues from it)"
        )
    else:
        where = "it kept no draws (none were saved before the stop)"
    because = f" ({why})" if why else ""
    record = output / "run.json"
    return (
        f"step {step['name']!r} stopped by {what}{because}: {where}; later steps did not run, and "
        f"{record} says so"
    )


def _warmup_checkpoint(path: Path) -> bool:
    """Whether a file of a step's folder (a path relative to it) is part of a warm-up's checkpoint.

    The NUTS warm-up of a sampler step checkpoints into ``checkpoints/warmup``
    (and a pilot after a borrowed warm-up into ``checkpoints/pilot``); a NUTS
    run's own warm-up is its ``nuts-chain-<c>-warmup.pkl`` parts (with their
    ``.json`` records).
    """
    parts = path.parts
    if not parts or parts[0] != "checkpoints":
        return False
    return (len(parts) > 2 and parts[1] in ("warmup", "pilot")) or path.name.split(".")[0].endswith("-warmup")
