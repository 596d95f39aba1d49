"""Files that are whole or absent: a kill while writing leaves the previous version.

Checkpoints are rewritten while a run goes on; a write cut short by a kill
must never leave a half file where a whole one was. Each write goes to a
temporary file beside the target, is flushed to disk, and replaces the
target with ``os.replace`` (atomic on one file system).
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
