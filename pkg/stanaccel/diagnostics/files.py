"""Writing results to disk without losing them.

A run can take hours, so an output path is checked before anything is
compiled or sampled (:func:`check_writable`; the command line's
:func:`check_output` also refuses to replace the run's inputs or a file
that is not netCDF). The netCDF file is then made in
memory (:func:`netcdf_bytes`: HDF5 never touches the disk) and written with
plain file writes, beside its path and renamed onto it, so a reader never
sees it half written. Why in memory: HDF5 writing onto a full disk leaves
the library in a failed state that crashed the process (SIGSEGV) when its
objects were freed, draws and all; a plain write that fails only raises
``OSError``, and the same bytes can then go elsewhere.

:func:`save_netcdf` writes where it is told or raises; :func:`save_or_rescue`,
what the command line and workflows use after a run, writes the draws to a
rescue file when the output cannot be written (:func:`write_or_rescue`): in
the output's folder, then the working folder, then the temporary folder,
under a name no other write takes. Its caller says where they went.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import file_kind, write_bytes
from stanaccel.diagnostics._arviz import az
from stanaccel.errors import OutputFailed


class OutputError(ValueError):
    """An output path cannot be written: a folder, an unwritable place, a missing parent."""

    errno: int | None = None
    """The disk's error number where the disk failed (full, read-only); None for a path that is wrong."""


class OutputWarning(UserWarning):
    """A file of a run went to a rescue file, or could not be written; the message says where and why."""


@dataclass(frozen=True)
class Written:
    """Where a file went: ``path``, which is the one asked for unless ``problem`` says why not."""

    path: Path
    asked: Path
    problem: str | None = None
    size: int = 0
    """Bytes written."""
    seconds: float = 0.0
    """Seconds the writing took (making the netCDF file in memory included, where it was made here)."""

    @property
    def rescued(self) -> bool:
        """Whether the file went to a rescue file instead of the path asked for."""
        return self.path != self.asked


def check_writable(path: str | Path, what: str = "output") -> Path:
    """Make sure ``path`` can be written as a file, creating its folder if needed.

    Writes and removes a scratch file beside ``path`` (beside the file a
    symbolic link names, which is where the output will go), so a read-only
    place or a full disk is found now rather than after the run. A path that
    names something other than a regular file (a folder, a device such as
    ``/dev/null``) is refused: an output is renamed onto its path, which
    would replace it. ``what`` names the file in the messages.

    Raises
    ------
    OutputError
        Naming the path and why it cannot be written; its ``errno`` is the
        disk's error where the disk is full or read-only.
    """
    if str(path) == "":
        raise OutputError(f"the {what} path is empty: give a file name, such as fit.nc")
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path} is a folder; give a file name, such as {path / 'fit.nc'}")
    kind = file_kind(path)
    if kind not in (None, "a regular file"):
        raise OutputError(
            f"{what} {path} is {kind}, not a file: an output is written by renaming a new file onto its "
            "path, which would replace it; give the path of a file"
        )
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder of {what} {path}: {exc.strerror or exc}") from exc
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputError(f"{what} {path} exists and is not writable")
    try:
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.write-check-") as file:
            file.write(bytes(SCRATCH_BYTES))
            file.flush()
            os.fsync(file.fileno())
    except OSError as exc:
        raise _unwritable(f"{what} {path}", target.parent, exc) from exc
    return path


SCRATCH_BYTES = 65536
"""Bytes :func:`check_writable` writes beside an output: a disk too full for them is full for any output."""


def _unwritable(output: str, folder: Path, error: OSError) -> OutputError:
    """Why ``output`` cannot be written, where making a file in its ``folder`` failed with ``error``."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        free = shutil.disk_usage(folder).free
        problem = OutputError(
            f"cannot write {output}: the disk of {folder} is full ({error.strerror}; {free / 1e6:.3g} MB "
            "free); make room there, or write the output on another disk"
        )
    else:
        problem = OutputError(
            f"cannot write {output}: its folder {folder} takes no new file ({_reason(error)}); an output is "
            "written as a new file beside its path and renamed onto it, so give an output in a folder you "
            "can write to"
        )
    problem.errno = error.errno  # the command line's exit status tells a full disk from bad input
    return problem


NETCDF_SIGNATURES = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")
"""How a netCDF file begins: netCDF-4 (HDF5, as stanaccel writes), or the classic formats."""


def check_output(
    path: str | Path,
    inputs: Iterable[tuple[str, str | Path | None]],
    what: str = "output",
    netcdf: bool = True,
) -> Path:
    """:func:`check_writable`, and that writing ``path`` loses nothing the user did not ask to replace.

    Refused: an output that is one of the run's input files (``inputs``: the
    program, its data, a settings file, an earlier run's file), compared as
    files (a symbolic link or another spelling of the path is the same file);
    with ``netcdf``, a file already there that is neither netCDF (an earlier
    run's output) nor empty.

    Parameters
    ----------
    inputs : iterable of (str, path)
        Each input as (what it is, its path): ``("data file", "data.json")``;
        a path of None is skipped.
    what : str
        What the file is, for the messages: "output", "metrics file".

    Raises
    ------
    OutputError
        Naming the file, the file it would replace, and what to do.
    """
    path = check_writable(path, what)
    for label, given in inputs:
        if given is not None and _same_file(path, given):
            shown = "" if str(given) == str(path) else f" ({given})"
            raise OutputError(
                f"{what} {path} is the {label}{shown}: writing it would replace your {label}; give another "
                "output file (-o)"
            )
    found = _not_netcdf(path) if netcdf else None
    if found is not None:
        raise OutputError(
            f"{what} {path} exists and is {found}, not a netCDF file of an earlier run: writing the output "
            f"would replace it; give another output file (-o), or remove {path} first if it is to go"
        )
    return path


def metrics_file(output: str | Path) -> Path:
    """Where a run's metrics go beside its netCDF file ``output``: ``fit.nc`` -> ``fit.metrics.json``."""
    output = Path(output)
    return output.with_name(output.name.removesuffix(".nc") + ".metrics.json")


def _same_file(path: Path, other: str | Path) -> bool:
    """Whether two paths name one existing file."""
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _not_netcdf(path: Path) -> str | None:
    """What the file at ``path`` is where it is neither netCDF nor empty ("a text file beginning
    'data {'"); None for a netCDF file, an empty one, or none."""
    try:
        with open(path, "rb") as file:
            head = file.read(80)
    except FileNotFoundError:
        return None
    except OSError as error:  # what it is cannot be told: it is not replaced
        return f"a file that cannot be read ({_reason(error)})"
    if not head or head.startswith(NETCDF_SIGNATURES):
        return None
    if b"\0" in head:
        return "a binary file of another kind"
    first = head.decode(errors="replace").strip().split("\n")[0]
    return f"a text file beginning {first[:40]!r}"


def netcdf_bytes(idata: az.InferenceData) -> memoryview:
    """The netCDF file of ``idata``, made in memory, as ``idata.to_netcdf`` would write it.

    The same layout as ArviZ's writer (its attributes at the root, one
    group per InferenceData group), so ``arviz.from_netcdf`` reads it back;
    made by h5netcdf on a ``BytesIO``, so that no disk error reaches HDF5.
    One difference, by measurement: ArviZ compresses every numeric
    variable with zlib, which saves little on draws (floating-point noise)
    and costs much. On a 1003-parameter posterior (4 chains x 1000 draws,
    warm-up kept: 161 MB) zlib took 13.6 s for 152 MB; integers and
    booleans alone compressed (tree depths, divergences: they shrink) took
    1.0 s for 161 MB, so only they are compressed (:func:`_compressible`).
    """
    buffer = io.BytesIO()
    with _local_locks():
        _write_groups(idata, buffer)
    return buffer.getbuffer()


def _write_groups(idata: az.InferenceData, buffer: io.BytesIO) -> None:
    """ArviZ's writer's steps, onto ``buffer``."""
    mode = "w"
    attrs = getattr(idata, "_attrs", None)
    if attrs:
        import xarray

        xarray.Dataset(attrs=attrs).to_netcdf(buffer, mode=mode, engine="h5netcdf", group="/")
        mode = "a"
    for group in idata.groups():
        data = getattr(idata, group)
        encoding = {
            name: {"zlib": True} for name, values in data.variables.items() if _compressible(values.dtype)
        }
        data.to_netcdf(buffer, mode=mode, engine="h5netcdf", group=group, encoding=encoding)
        mode = "a"
    if mode == "w":  # no group and no attributes: an empty netCDF file, as ArviZ writes one
        import h5netcdf

        h5netcdf.File(buffer, mode="w").close()


def _local_locks() -> contextlib.AbstractContextManager:
    """While a Dask client is open, xarray locks a file it writes on the cluster, by its path; a
    ``BytesIO`` has none. The write here is of NumPy arrays in this process, so Dask's synchronous
    scheduler (a lock of this process) is the right one."""
    dask = sys.modules.get("dask")
    if dask is None:
        return contextlib.nullcontext()
    import dask.config

    return dask.config.set(scheduler="synchronous")


def _compressible(dtype: np.dtype) -> bool:
    """Whether a variable of this type is compressed: integers, booleans, bytes (not floating point)."""
    if dtype.kind == "V":
        return all(_compressible(item) for item, _ in dtype.fields.values())
    return dtype.kind in "biuS"


def save_netcdf(idata: az.InferenceData, path: str | Path) -> Path:
    """Write InferenceData to ``path`` (netCDF) atomically, creating its folder; returns ``path``.

    ``arviz.from_netcdf`` reads it back. A symbolic link at ``path`` is
    followed: the file it names is replaced, the link stays.

    Raises
    ------
    OutputError
        ``path`` cannot be written; the message names it and says why
        (a full disk, a folder in its place). Nothing is written elsewhere:
        the InferenceData is still yours to save again.
    """
    path = Path(path)
    payload = netcdf_bytes(idata)
    try:
        write_bytes(path, payload)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {_reason(exc)}") from exc
    return path


def save_or_rescue(idata: az.InferenceData, path: str | Path) -> Written:
    """Write InferenceData to ``path``; where that fails, to a rescue file (:func:`write_or_rescue`)."""
    began = time.perf_counter()
    written = write_or_rescue(netcdf_bytes(idata), path)
    return replace(written, seconds=time.perf_counter() - began)


def write_or_rescue(payload: bytes | memoryview, path: str | Path) -> Written:
    """Write ``payload`` to ``path`` atomically; where that fails, to a rescue file, whose path is returned.

    The rescue file is ``STEM-rescued-TIME-PID.SUFFIX``, made anew (never
    over another file: a counter follows where the name is taken), tried in
    ``path``'s folder, then the working folder, then the temporary folder.

    Returns
    -------
    Written
        The file written, the path asked for, and why that path failed.

    Raises
    ------
    OutputFailed
        Every place failed; the message names each place and why.
    """
    path, began, size = Path(path), time.perf_counter(), len(payload)
    try:
        write_bytes(path, payload)
        return Written(path, path, size=size, seconds=time.perf_counter() - began)
    except OSError as exc:
        problem = _reason(exc)
    failures = [f"{path}: {problem}"]
    for folder in rescue_folders(path):
        try:
            rescue = _write_new(folder, _rescue_name(path), payload)
        except OSError as exc:
            failures.append(f"{folder}: {_reason(exc)}")
            continue
        return Written(rescue, path, problem, size, time.perf_counter() - began)
    raise OutputFailed(
        f"could not write {path} nor a rescue file anywhere ({'; '.join(failures)}): this run's draws "
        "are lost; make room, or set TMPDIR to a folder with room (the last place tried), and run again"
    )


def rescue_folders(path: Path) -> Iterator[Path]:
    """Where a rescue file is tried, in turn: ``path``'s folder, the working folder, the temporary folder."""
    seen = set()
    for folder in (Path(os.path.realpath(path)).parent, Path.cwd(), Path(tempfile.gettempdir())):
        if folder not in seen:
            seen.add(folder)
            yield folder


def _rescue_name(path: Path) -> str:
    return f"{path.stem}-rescued-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{path.suffix or '.nc'}"


def _write_new(folder: Path, name: str, payload: bytes | memoryview) -> Path:
    """Write ``payload`` to a file of ``folder`` that did not exist (``name``, or ``name`` with a counter)."""
    stem, dot, suffix = name.rpartition(".")
    for count in range(1000):
        target = folder / (name if count == 0 else f"{stem}-{count}{dot}{suffix}")
        try:
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(payload)
                file.flush()
                os.fsync(file.fileno())
        except OSError:
            target.unlink(missing_ok=True)
            raise
        return target
    raise FileExistsError(f"{folder / name}: a thousand rescue files of that name already exist")


def _reason(error: OSError) -> str:
    """An OSError's reason in words: "No space left on device", not "[Errno 28] ..."."""
    return error.strerror or str(error) or type(error).__name__


def json_text(value: Any, indent: int = 2) -> str:
    """``value`` as strict JSON (:func:`jsonable`), NaN and infinities written as null.

    JSON has no number for them: Python's ``json`` writes a bare ``NaN``,
    which other readers (JavaScript, ``jq``) refuse. An R-hat or ESS that is
    not defined (too few draws) is NaN in the metrics, and null in their file.
    Another value JSON has no type for (a path) is written as its text.
    """
    return json.dumps(_finite(jsonable(value)), indent=indent, allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    """``value`` (plain JSON values) with each float that is NaN or infinite made None."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def jsonable(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars, tuples and dataclasses made plain JSON values."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return jsonable(dict(vars(value)))
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value
