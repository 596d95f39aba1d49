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
refused, naming the first one's process id. A folder that holds files the run
would write but did not (a user's ``workflow.toml`` where ``output = "."``) is
refused too (:func:`check_output_folder`). ``run.json`` is written before the
first step (status ``running``, and the step that runs) and after each step;
a step that fails is recorded ``failed`` with its error. Ctrl-C stops
the running step, which keeps its partial outputs; the workflow then stops
with :class:`~stanaccel.workflow.interrupts.WorkflowInterrupted` and
``run.json`` names the interrupted step.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import reprlib
import time
import tomllib
from pathlib import Path
from typing import Any

from stanaccel.atomic import exclusive_lock, write_bytes
from stanaccel.diagnostics.files import check_writable
from stanaccel.diagnostics.report import RUN_LOCK
from stanaccel.errors import OutputFailed
from stanaccel.executors import Executor, check_spec, executor_from
from stanaccel.seeds import check_seed
from stanaccel.workflow import cache as step_cache
from stanaccel.workflow.actions import ACTIONS
from stanaccel.workflow.context import RunContext, Workflow
from stanaccel.workflow.interrupts import InterruptWatch, WorkflowInterrupted
from stanaccel.workflow.provenance import provenance, versions
from stanaccel.workflow.validation import (
    check_programs,
    check_step_names,
    check_warmup_programs,
    check_workflow,
    normalise_names,
)

LOCK = RUN_LOCK
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
    if path.is_dir():
        raise IsADirectoryError(f"workflow file {path} is a folder: give a workflow .toml file")
    if not path.is_file():
        raise FileNotFoundError(f"workflow file not found: {path}")
    with open(path, "rb") as handle:
        try:
            config = tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); a TOML "
                "file is UTF-8: save it as UTF-8"
            ) from None
    normalise_names(config)
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

    Raises
    ------
    TypeError
        An argument of a type it does not take (``workflow`` not a file or a Workflow, ``cache`` not a
        bool, ...): the message names it and what it takes.
    """
    check_run_arguments(workflow, output, cache, progress)
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
    check_warmup_programs(workflow.steps, workflow.source)
    check_writable(workflow.output / "run.json")
    check_output_folder(workflow)
    with output_lock(workflow.output):
        _write(workflow.output / "run.json", _first_record(workflow))  # the folder is a run's from now on
        _copy_workflow_file(workflow)
        if isinstance(executor, Executor):
            context = RunContext(workflow, workflow.output, progress=progress, executor=executor)
            return _run_steps(workflow, context, use_cache)
        with executor_from(executor) as made:
            context = RunContext(workflow, workflow.output, progress=progress, executor=made)
            return _run_steps(workflow, context, use_cache)


def check_run_arguments(workflow, output, cache, progress) -> None:
    """Refuse, naming the argument and what it takes, an argument of :func:`run_workflow` it cannot use.

    ``cache = "no"`` is refused rather than read as true (a non-empty text is), which would load the
    stored steps the caller meant to run again.
    """

    def refuse(name: str, takes: str, value) -> TypeError:
        return TypeError(f"{name} must be {takes}; not {type(value).__name__} ({reprlib.repr(value)})")

    if not isinstance(workflow, Workflow | str | os.PathLike):
        raise refuse(
            "workflow", "a workflow file (a str or Path, such as 'workflow.toml') or a Workflow", workflow
        )
    if output is not None and not isinstance(output, str | os.PathLike):
        raise refuse("output", "a folder (a str or Path), or None for the workflow file's own", output)
    for name, value in (("workflow", workflow), ("output", output)):
        if isinstance(value, str | os.PathLike) and str(value) == "":
            raise ValueError(f"{name} is empty: give a {'file' if name == 'workflow' else 'folder'} name")
    if cache is not None and not isinstance(cache, bool):
        raise refuse("cache", "True (load unchanged steps), False (run every step again) or None", cache)
    if not isinstance(progress, bool):
        raise refuse("progress", "True or False", progress)


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


def check_output_folder(workflow: Workflow) -> None:
    """Refuse an output folder where the run would overwrite what is not a stanaccel run's.

    The run writes ``run.json``, ``provenance.json``, a copy of the workflow
    file (``workflow.toml``) and its report pages beside the steps' folders.
    In a folder of the user's own (``output = "."``) these names may be the
    user's files: each is refused unless a stanaccel run wrote it (a
    ``run.json`` with a run's keys, or a run's lock file, beside it; a report
    page that stanaccel wrote) or it is the workflow file itself. A step's
    folder must be a folder, and one that no stanaccel step made must not
    hold files of the names the step writes (a user's ``data/data.json``).

    Raises
    ------
    ValueError
        Naming the file or folder, and what to do.
    """
    from stanaccel.diagnostics.report import is_report, run_record_problem

    output = workflow.output
    instead = "give the run another output folder (--output, or output in [workflow]), or move it"
    record = output / "run.json"
    if record.exists() and run_record_problem(record) is not None:
        raise ValueError(
            f"{record} is not the record of a stanaccel run ({run_record_problem(record)}), and this run "
            f"would overwrite it: {instead}"
        )
    ours = record.exists() or (output / LOCK).exists()
    for name in ("workflow.toml", "provenance.json"):
        path = output / name
        if path.exists() and not ours and not _is_the_workflow_file(path, workflow):
            raise ValueError(
                f"{path} in the output folder {output} was not written by a stanaccel run (there is no "
                f"run.json of one beside it), and this run would overwrite it: {instead}"
            )
    for step in workflow.steps:
        if not isinstance(step.get("name"), str) or step.get("action") not in ACTIONS:
            continue  # a step made in Python without a name or with no action: refused when it runs
        if step["action"] == "report":
            page = output / step.get("file", "report.html")
            if page.exists() and not is_report(page):
                raise ValueError(
                    f"step {step['name']!r}: {page} is not a report that stanaccel wrote, and the step would "
                    f"overwrite it: give the step another file, {instead}"
                )
            continue
        folder = output / step["name"]
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise ValueError(
                f"step {step['name']!r}: {folder} is a file, where the step's folder goes: move it, rename "
                "the step, or give the run another output folder"
            )
        if folder.is_dir() and not any((folder / name).exists() for name in step_cache.CACHE_FILES):
            clash = sorted(name for name in step_cache.matching(folder, ACTIONS[step["action"]].writes))
            if clash:
                raise ValueError(
                    f"step {step['name']!r}: its folder {folder} was not made by a stanaccel step and holds "
                    f"{', '.join(clash[:3])}, which the step would overwrite: move them, rename the step, or "
                    "give the run another output folder"
                )


def _is_the_workflow_file(path: Path, workflow: Workflow) -> bool:
    """Whether ``path`` is the workflow file itself, or a file of the same bytes."""
    source = workflow.source
    if source is None or not path.is_file():
        return False
    return os.path.samefile(path, source) or path.read_bytes() == source.read_bytes()


def _copy_workflow_file(workflow: Workflow) -> None:
    """Copy the workflow file into the output folder as ``workflow.toml`` (not onto itself)."""
    copy = workflow.output / "workflow.toml"
    if workflow.source is None or (copy.exists() and os.path.samefile(copy, workflow.source)):
        return
    write_bytes(copy, workflow.source.read_bytes())


def _first_record(workflow: Workflow) -> dict[str, Any]:
    """What ``run.json`` holds before the first step: the run's name, seed and versions, status running."""
    return {
        "workflow": workflow.name,
        "seed": workflow.seed,
        "versions": versions(),
        "status": "running",
        "steps": [],
    }


DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})
"""A write failed for the disk's sake (full, over quota, failing, read-only), not the step's."""


def _run_steps(workflow: Workflow, context: RunContext, use_cache: bool) -> RunContext:
    output = workflow.output
    record: dict[str, Any] = {**_first_record(workflow), "executor": repr(context.executor)}
    keys: dict[str, str] = {}
    resolved: list[dict[str, Any]] = []
    for step in workflow.steps:
        start = time.perf_counter()
        seed = context.step_seed(step)
        key = step_cache.step_key(step, seed, context, keys)
        keys[step["name"]] = key
        resolved.append({**step, "seed": seed, "key": key})
        folder = output / step["name"]
        entry = {"name": step["name"], "action": step["action"], "seed": seed, "key": key}
        cached = step["action"] not in step_cache.UNCACHED_ACTIONS
        stored = step_cache.load(folder, key) if use_cache and cached else None
        if stored is not None:
            print(
                f"[{workflow.name}] step {step['name']} ({step['action']}): unchanged, loaded from {folder}"
            )
            result, done = stored
            context.results[step["name"]] = result
            resolved[-1].update(_settings_used(result))
            loaded = {**entry, "status": "done", "cached": True, "seconds": done.get("seconds")}
            try:
                _write(output / "run.json", _with_step(record, loaded))
            except OSError as error:
                raise _record_failure(record, entry, start, output, error) from error
            record["steps"].append(loaded)
            continue
        print(f"[{workflow.name}] step {step['name']} ({step['action']}), seed {seed}", flush=True)
        record["running_step"] = step["name"]  # for a report while it runs
        try:
            _write(output / "run.json", record)
            if cached:
                step_cache.start(folder, key, fresh=not use_cache, writes=ACTIONS[step["action"]].writes)
        except OSError as error:
            doing = f"could not prepare its folder {folder}"
            raise _record_failure(record, entry, start, output, error, doing) from error
        watch = InterruptWatch()
        try:
            with watch.watching():
                result = ACTIONS[step["action"]].run(step, context, seed)
        except BaseException as exc:
            # so that a start afresh removes these files, not later ones (a full disk: the error says more)
            with contextlib.suppress(OSError):
                step_cache.record_written(folder)
            if not (watch.seen or isinstance(exc, KeyboardInterrupt)):
                raise _record_failure(record, entry, start, output, exc) from exc
            _record_stop(record, entry, start, output)
            why = str(exc) if isinstance(exc, KeyboardInterrupt) else ""
            raise WorkflowInterrupted(_stop_message(step, output, why, watch.what)) from exc
        if watch.seen:
            with contextlib.suppress(OSError):
                step_cache.record_written(folder)
            _record_stop(record, entry, start, output)
            raise WorkflowInterrupted(_stop_message(step, output, what=watch.what))
        context.results[step["name"]] = result
        resolved[-1].update(_settings_used(result))
        seconds = time.perf_counter() - start
        done = {**entry, "status": "done", "cached": False, "seconds": seconds, **_resumed(result)}
        try:
            if cached:
                step_cache.store(
                    folder, key, result, {"name": step["name"], "seed": seed, "seconds": seconds}
                )
            _write(output / "run.json", _with_step(record, done))
            _write(output / "provenance.json", provenance(workflow, resolved))
        except OSError as error:
            raise _record_failure(record, entry, start, output, error) from error
        record.pop("running_step")
        record["steps"].append(done)
    record["status"] = "done"
    try:
        _write(output / "run.json", record)
        _write(output / "provenance.json", provenance(workflow, resolved))
    except OSError as error:
        raise OutputFailed(
            f"every step is done, but {error.filename} could not be written ({error.strerror}); make room "
            "and run the workflow again: the steps are loaded, not run again"
        ) from error
    return context


def _with_step(record: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the step ``entry`` done and no step running."""
    return {**{k: v for k, v in record.items() if k != "running_step"}, "steps": [*record["steps"], entry]}


def _resumed(result: dict[str, Any]) -> dict[str, Any]:
    """``resumed_draws`` for ``run.json``: the draws per chain a sampler step took from its checkpoints,
    where it resumed from them; {} otherwise."""
    run = getattr(result.get("result"), "run", None) or result.get("fit")
    resumed = getattr(run, "resumed_draws", None)
    if resumed is None or not any(int(n) for n in resumed):
        return {}
    return {"resumed_draws": [int(n) for n in resumed]}


def _record_failure(
    record: dict[str, Any], entry: dict[str, Any], start: float, output: Path, error: BaseException, what=""
) -> BaseException:
    """Write ``run.json`` saying that this step failed and with what error; return the error to raise.

    Where a write failed for the disk's sake (:data:`DISK_ERRNOS`), that is an
    :class:`~stanaccel.errors.OutputFailed` naming the step and the file (or
    ``what`` the step was doing); otherwise the error itself.
    """
    if isinstance(error, OSError) and error.errno in DISK_ERRNOS and not isinstance(error, OutputFailed):
        where = f"{error.filename}" if error.filename else f"its files in {output / entry['name']}"
        doing = what or f"could not write {where}"
        raised: BaseException = OutputFailed(
            f"step {entry['name']!r}: {doing} ({error.strerror}); make room (or mend the disk) and run the "
            "workflow again: the steps done are loaded, and this one runs again"
        )
        raised.errno = error.errno
    else:
        raised = error
    record.pop("running_step", None)
    record["steps"].append(
        {**entry, "status": "failed", "error": str(raised), "seconds": time.perf_counter() - start}
    )
    record["status"] = "failed"
    record["failed_step"] = entry["name"]
    _write_even_on_a_full_disk(output / "run.json", record)
    return raised


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
    """Write a JSON record atomically (a full disk leaves the last one whole); an ``OSError`` names
    ``path``."""
    try:
        write_bytes(path, json.dumps(record, indent=2, default=str).encode())
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from error


def _write_even_on_a_full_disk(path: Path, record: dict[str, Any]) -> None:
    """Write a JSON record as :func:`_write` does; where that fails (a full disk has no room for the new
    file), over the old file in place, compact (and padded with spaces to the old length), where it fits
    in the blocks the old file has: no new block is needed then. Where neither can be done, the old record
    stays (the error raised says why).
    """
    try:
        _write(path, record)
        return
    except OSError:
        pass
    payload = json.dumps(record, separators=(",", ":"), default=str).encode()
    with contextlib.suppress(OSError):
        with open(path, "r+b") as handle:
            held = os.fstat(handle.fileno())
            if len(payload) <= max(held.st_size, held.st_blocks * 512):
                handle.write(payload.ljust(held.st_size))
                handle.flush()
                os.fsync(handle.fileno())


def _record_stop(record: dict[str, Any], entry: dict[str, Any], start: float, output: Path) -> None:
    """Write ``run.json`` saying that this step was interrupted and the workflow stopped there."""
    record.pop("running_step", None)
    record["steps"].append({**entry, "status": "interrupted", "seconds": time.perf_counter() - start})
    record["status"] = "interrupted"
    record["interrupted_step"] = entry["name"]
    _write_even_on_a_full_disk(output / "run.json", record)


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
