"""Files that are whole or absent: a kill while writing leaves the previous version.

Checkpoints are rewritten while a run goes on; a write cut short by a kill
must never leave a half file where a whole one was. Each write goes to a
temporary file beside the target, is flushed to disk, and replaces the
target with ``os.replace`` (atomic on one file system).

A checkpoint must also be whole when it is read back: a disk error or a
stray write can damage it after it was written. :func:`write_checked_pickle`
records the file's size and SHA-256 in a manifest beside it, written last
(as the compile cache does, :mod:`stanaccel.stan.cache`), and
:func:`read_checked_pickle` refuses a file that does not match it.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any


def write_bytes(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` atomically, creating its folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        file.write(payload)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def write_pickle(path: Path, value: Any) -> None:
    """Pickle ``value`` to ``path`` atomically, creating its folder."""
    write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def read_pickle(path: Path) -> Any:
    """What ``path`` holds; raises ``ValueError`` saying why where it cannot be read."""
    try:
        with open(path, "rb") as file:
            return pickle.load(file)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as error:
        raise ValueError(f"{path} cannot be read ({error})") from error


def write_checked_pickle(path: Path, value: Any) -> None:
    """Pickle ``value`` to ``path`` atomically, then its manifest (size, SHA-256) beside it.

    A kill between the two leaves a file that does not match its manifest,
    which :func:`read_checked_pickle` refuses.
    """
    from stanaccel.stan.cache import write_manifest

    write_pickle(path, value)
    write_manifest(Path(path), Path(path), {})


def read_checked_pickle(path: Path) -> Any:
    """What ``path`` holds, if it matches its manifest; else ``ValueError`` naming the file and why."""
    from stanaccel.stan.cache import damage

    problem = damage(Path(path))
    if problem is not None:
        raise ValueError(f"{path} is damaged ({problem})")
    return read_pickle(path)


def remove_checked(path: Path) -> None:
    """Remove a file written by :func:`write_checked_pickle` and its manifest, if present."""
    from stanaccel.stan.cache import manifest_path

    for file in (Path(path), manifest_path(Path(path))):
        file.unlink(missing_ok=True)
