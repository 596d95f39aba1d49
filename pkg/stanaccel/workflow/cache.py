"""Cached workflow steps: a step whose inputs did not change is loaded, not recomputed.

A step's key is a SHA-256 hash of canonical JSON holding everything that
decides its result: its action and settings, its seed, the keys of the
earlier steps it reads, the content hash of every file it names (Stan
programs, data, approximation programs, CmdStan CSV files; a bundled program
by its text) and the stanaccel version. Arrays, where a step given from
Python holds them, are hashed with ``joblib.hash``.

The step's folder holds its outputs, ``result.pkl`` (what later steps read)
and, written last by an atomic rename, ``step.json`` (its key, how long it
took, the size and SHA-256 of ``result.pkl`` and the size of each output
file): the completion marker, as in the compile cache. A rerun loads a step
whose ``step.json`` has the same key and whose ``result.pkl`` and outputs
match it; any other step runs again, and every step that reads it gets a new
key and runs again too. A damaged ``step.json`` or ``result.pkl``, or an
output file missing or of another size, is said (:class:`StepCacheDamaged`)
and the step runs again. ``.key`` is written when a step starts, so that a
step interrupted and rerun with unchanged settings keeps its checkpoints
(resume, charged the time the checkpointed draws took); a step whose
settings changed, or a run with the cache off (``--recompute``), starts
afresh: the files stanaccel wrote in its folder are removed first.

Only those: ``.files.json``, the folder's manifest, says which they are
(:func:`own_files`). When a step starts it lists the files already there
that are not stanaccel's (a user's notes) and the names its action writes
(:data:`stanaccel.workflow.actions.ACTIONS`: ``posterior.nc``,
``checkpoints/*``, a study's ``*.csv``, ...); when it completes, fails or
is stopped, every file it wrote. A step killed part way (SIGKILL, a power
cut) owns what appeared in its folder after it started whose name is of
those: a note added while it ran is not among them, and stays the user's
when the step resumes. Anything else in the folder is never removed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import pickle
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import file_sha256, write_bytes
from stanaccel.workflow.context import RunContext

MARKER = "step.json"
RESULT = "result.pkl"
STARTED = ".key"
MANIFEST = ".files.json"
"""The step folder's manifest: the files there before the step started, then the files it wrote."""
CACHE_FILES = (MARKER, RESULT, STARTED, MANIFEST)
NOT_INPUTS = ("name", "action", "method")
"""Step keys whose values name no step or file (a method or action may share an earlier step's name)."""
UNCACHED_ACTIONS = frozenset({"report"})
"""Actions always rerun: they read the whole output folder, and cost little."""
EVERY_STEP_WRITES = ("*.tmp", "*-rescued-*")
"""Names any step may write: a file being written atomically (``.name.PID.tmp``), a rescue file."""


class StepCacheDamaged(UserWarning):
    """A completed step's stored result or outputs are damaged or missing: the step runs again."""


class StepNotStorable(UserWarning):
    """A step's result could not be pickled, so the step will run again next time."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stanaccel")
    except PackageNotFoundError:
        return "unknown"


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes; of a folder, of its CmdStan CSV files' names and bytes. A Stan program's
    is of its text with the files its ``#include`` lines name inlined: editing one changes the program."""
    digest = hashlib.sha256()
    for file in sorted(path.glob("*.csv")) if path.is_dir() else [path]:
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    if path.suffix == ".stan" and path.is_file():
        digest.update(_included(path).encode())
    return digest.hexdigest()


def _included(program: Path) -> str:
    """A Stan program with its ``#include`` files inlined, where it has any ("" otherwise, or where one is
    missing: the step says so when it runs)."""
    from stanaccel.stan.compiler import INCLUDE, read_program
    from stanaccel.stan.errors import StanCompileError

    text = program.read_text(errors="replace")
    if not INCLUDE.search(text):
        return ""
    try:
        return read_program(program)[0]
    except StanCompileError:
        return ""


def _inputs(value: Any, context: RunContext, earlier: dict[str, str], found: dict[str, str]) -> Any:
    """``value`` as canonical JSON material: earlier steps by key, files by content hash."""
    if isinstance(value, dict):
        return {str(k): _inputs(v, context, earlier, found) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_inputs(v, context, earlier, found) for v in value]
    if isinstance(value, np.ndarray):
        import joblib

        return {"array": joblib.hash(value)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, str):
        if value in earlier:
            found[f"step:{value}"] = earlier[value]
        else:
            path = _named_file(value, context)
            if path is not None:
                found[f"file:{value}"] = file_digest(path)
    return value


def _named_file(text: str, context: RunContext) -> Path | None:
    """The file (or folder) a setting names, if it names one: a path, or a bundled program's name."""
    from stanaccel.programs import program_path

    if "\n" in text or len(text) > 4096:
        return None
    path = context.resolve_path(text)
    if path.is_file() or (path.is_dir() and any(path.glob("*.csv"))):
        return path
    try:
        return program_path(text)
    except (FileNotFoundError, ValueError, KeyError):
        return None


def step_key(step: dict[str, Any], seed: int, context: RunContext, earlier: dict[str, str]) -> str:
    """The hash of everything that decides the step's result (see the module docstring).

    ``earlier`` maps each earlier step's name to its key.
    """
    files: dict[str, str] = {}
    settings = {k: v for k, v in step.items() if k not in NOT_INPUTS}
    material = {
        "action": step["action"],
        "method": step.get("method"),
        "settings": _inputs(settings, context, earlier, files),
        "seed": int(seed),
        "inputs": dict(sorted(files.items())),
        "stanaccel": _version(),
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(folder: Path, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The stored result of a completed step with this key and its ``step.json`` record, or None.

    None (with a :class:`StepCacheDamaged` warning naming the file) also where
    ``step.json`` or ``result.pkl`` is damaged or an output recorded in
    ``step.json`` is missing or of another size: the step runs again.
    """
    marker = folder / MARKER
    if not marker.is_file():
        return None
    try:
        record = json.loads(marker.read_text())
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as error:
        return _damaged(folder, f"{marker} is unreadable ({error})")
    if record.get("key") != key:
        return None
    problem = _mismatch(folder, record)
    if problem is not None:
        return _damaged(folder, problem)
    try:
        with open(folder / RESULT, "rb") as handle:
            return pickle.load(handle), record
    except (OSError, ValueError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as error:
        return _damaged(folder, f"{folder / RESULT} cannot be read ({error})")


def _mismatch(folder: Path, record: dict[str, Any]) -> str | None:
    """Why the stored result or an output of a completed step differs from its record, or None."""
    result = folder / RESULT
    if not result.is_file():
        return f"{result} is missing"
    stored = record.get("result")
    if not isinstance(stored, dict):
        return f"{folder / MARKER} records no size and SHA-256 of {RESULT}"
    if result.stat().st_size != stored.get("size") or file_sha256(result) != stored.get("sha256"):
        return f"{result} does not match the size and SHA-256 recorded in {MARKER}"
    outputs = record.get("outputs", {})
    for name, size in outputs.items() if isinstance(outputs, dict) else ():
        path = folder / name
        if not path.is_file():
            return f"its output {path} is missing"
        if path.stat().st_size != size:
            return f"its output {path} has {path.stat().st_size} bytes, not the {size} it was written with"
    return None


def _damaged(folder: Path, reason: str) -> None:
    """Say why a step's stored result is not used, and drop its completion marker."""
    warnings.warn(
        f"step {folder.name!r}: not loaded from its cache: {reason}; running the step again",
        StepCacheDamaged,
        stacklevel=3,
    )
    (folder / MARKER).unlink(missing_ok=True)
    return None


def _outputs(folder: Path, own: set[str]) -> dict[str, int]:
    """The size of each output file of a step (of its ``own`` files, not its cache files or
    checkpoints), by relative path."""
    return {
        name: (folder / name).stat().st_size
        for name in sorted(own)
        if name not in CACHE_FILES
        and name.split("/")[0] != "checkpoints"
        and not Path(name).name.startswith(".")
    }


def _files(folder: Path) -> set[str]:
    """Every file under ``folder`` (and every link, to a folder too, not followed), relative to it."""
    found = set()
    for root, folders, names in os.walk(folder):
        base = Path(root).relative_to(folder)
        links = [f for f in folders if (Path(root) / f).is_symlink()]
        found.update((base / name).as_posix() for name in [*names, *links])
    return found


def own_files(folder: Path) -> set[str]:
    """The files in a step's folder that stanaccel wrote, as paths relative to the folder.

    Read from the folder's manifest (:data:`MANIFEST`): the files the step
    wrote, recorded when it completed, failed or was stopped, or, for a step
    still running or killed part way, every file but those that were there
    before it started, of the names its action writes (the manifest's
    ``writes``: a user's ``notes.txt`` added meanwhile is not among them). A
    folder from a stanaccel without manifests owns its cache files, its
    checkpoints and the outputs its ``step.json`` records.
    """
    if not folder.is_dir():
        return set()
    present = _files(folder)
    manifest = _read_json(folder / MANIFEST)
    if isinstance(manifest.get("written"), list):
        own = set(manifest["written"])
    elif isinstance(manifest.get("before"), list):
        own = present - set(manifest["before"])
        if isinstance(manifest.get("writes"), list):
            own = {name for name in own if _written_by_steps(name, manifest["writes"])}
    else:
        outputs = _read_json(folder / MARKER).get("outputs")
        checkpoints = {name for name in present if name.split("/")[0] == "checkpoints"}
        own = checkpoints | set(outputs if isinstance(outputs, dict) else ())
    return (own | set(CACHE_FILES)) & present


def matching(folder: Path, writes: tuple[str, ...]) -> set[str]:
    """The files in ``folder`` (paths relative to it) whose names are among ``writes``, the names a step's
    action writes: those the step would overwrite."""
    return {name for name in _files(folder) if _matches(name, writes)}


def _written_by_steps(name: str, writes: list[str]) -> bool:
    """Whether a file (a path relative to its step's folder) has a name that the step's action writes."""
    return _matches(name, (*writes, *EVERY_STEP_WRITES, *CACHE_FILES))


def _matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether a path relative to a step's folder, or its file name, matches one of ``patterns``."""
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(Path(name).name, p) for p in patterns)


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a file; {} where there is none or it cannot be read."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _remove(folder: Path, own: set[str]) -> None:
    """Remove the files ``own`` from ``folder``, then the folders inside it that this left empty."""
    emptied = set()
    for name in own:
        (folder / name).unlink(missing_ok=True)
        emptied.update(str(parent) for parent in Path(name).parents if str(parent) != ".")
    for name in sorted(emptied, key=lambda n: n.count("/"), reverse=True):
        with contextlib.suppress(OSError):  # not empty: it holds files stanaccel did not write
            (folder / name).rmdir()


def start(folder: Path, key: str, *, fresh: bool = False, writes: tuple[str, ...] = ()) -> None:
    """Prepare the folder of a step about to run: keep it (and its checkpoints) if the
    last attempt had the same key and not ``fresh``, else remove the files stanaccel wrote there
    (:func:`own_files`; the others stay); drop the completion marker, and record in the manifest
    the files that are not the step's own and ``writes``, the names (``fnmatch`` patterns, of the
    path in the folder or of the file's name) that the step's action writes."""
    started = folder / STARTED
    own = own_files(folder)
    if folder.is_dir() and (started.is_file() or (folder / MARKER).is_file()):
        previous = started.read_text().strip() if started.is_file() else ""
        if fresh or previous != key:
            _remove(folder, own)
            own = set()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    before = sorted(_files(folder) - own - set(CACHE_FILES))
    manifest = {"before": before, **({"writes": list(writes)} if writes else {})}
    write_bytes(folder / MANIFEST, json.dumps(manifest, indent=1).encode())
    (folder / STARTED).write_text(key + "\n")


def record_written(folder: Path, *also: str) -> set[str]:
    """Record in the manifest the files stanaccel wrote in a step's folder, as the step completes or
    stops (and ``also``, about to be written); return them.

    Files added to the folder after this are not the step's own. Nothing is
    recorded for a folder without a manifest (a step that did not start one).
    """
    if not (folder / MANIFEST).is_file():
        return set()
    own = own_files(folder) | {MANIFEST, *also}
    write_bytes(folder / MANIFEST, json.dumps({"written": sorted(own)}, indent=1).encode())
    return own


def store(folder: Path, key: str, result: dict[str, Any], record: dict[str, Any]) -> bool:
    """Write ``result.pkl`` and then, atomically, ``step.json``; False if the result does not pickle."""
    try:
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        warnings.warn(
            f"step {folder.name!r}: its result cannot be stored ({error}); it will run again next time",
            StepNotStorable,
            stacklevel=2,
        )
        return False
    write_bytes(folder / RESULT, payload)
    stored = {"size": len(payload), "sha256": file_sha256(folder / RESULT)}
    own = record_written(folder, MARKER)
    marker = {"key": key, **record, "result": stored, "outputs": _outputs(folder, own)}
    write_bytes(folder / MARKER, json.dumps(marker, indent=2).encode())
    return True
