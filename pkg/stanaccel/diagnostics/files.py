"""Writing results to disk without losing them.

A run can take hours, so an output path is checked before anything is
compiled or sampled (:func:`check_writable`), and if writing still fails at
the end (the disk filled, the folder vanished), the draws go to a fallback
file whose path is returned (:func:`save_netcdf`), never to nowhere. A netCDF
file is written beside its path and then renamed to it, so a reader never sees
it half written.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import write_with
from stanaccel.diagnostics._arviz import az


class OutputError(ValueError):
    """An output path cannot be written: a folder, an unwritable place, a missing parent."""


def check_writable(path: str | Path) -> Path:
    """Make sure ``path`` can be written as a file, creating its folder if needed.

    Creates and removes a scratch file beside ``path``, so a read-only place
    or a full disk is found now rather than after the run.

    Raises
    ------
    OutputError
        Naming the path and why it cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"output {path} is a folder; give a file name, such as {path / 'fit.nc'}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the folder of output {path}: {exc.strerror or exc}") from exc
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputError(f"output {path} exists and is not writable")
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.write-check-"):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write output {path}: {exc.strerror or exc}") from exc
    return path


def fallback_path(path: str | Path) -> Path:
    """Where draws go when ``path`` cannot be written: the working folder, else the temp folder."""
    name = f"{Path(path).stem}-rescued-{time.strftime('%Y%m%d-%H%M%S')}{Path(path).suffix or '.nc'}"
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        if os.access(folder, os.W_OK):
            return folder / name
    return Path(tempfile.gettempdir()) / name


def save_netcdf(idata: az.InferenceData, path: str | Path) -> Path:
    """Write InferenceData to ``path`` atomically; if that fails, to a fallback file.

    Returns
    -------
    Path
        The file written: ``path``, or the fallback (see :func:`fallback_path`)
        when writing ``path`` raised any exception (a full disk, a folder in
        its place, a netCDF library error). The caller tells the user.
    """
    path = Path(path)
    try:
        write_with(path, lambda temporary: idata.to_netcdf(str(temporary)))
        return path
    except Exception:
        rescue = fallback_path(path)
        write_with(rescue, lambda temporary: idata.to_netcdf(str(temporary)))
        return rescue


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
