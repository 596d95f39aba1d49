"""The on-disk cache of built Stan programs.

A build is keyed by a hash of everything that changes its output (program
text, bridge source, compiler flags and version, httpstan version). Builds of
the same key are serialised with a file lock, and each artefact is written
under a temporary name and renamed into place, so concurrent builds (several
processes, or pytest-xdist workers) never see or leave a half-written file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

CACHE_ENV = "STANACCEL_CACHE"


def cache_dir() -> Path:
    """The cache folder: ``$STANACCEL_CACHE``, else ``$XDG_CACHE_HOME/stanaccel``
    (``~/.cache/stanaccel`` by default)."""
    if os.environ.get(CACHE_ENV):
        path = Path(os.environ[CACHE_ENV])
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path = Path(base) / "stanaccel"
    path.mkdir(parents=True, exist_ok=True)
    return path


def content_hash(*parts: str) -> str:
    """A short hex digest of the given texts (order matters)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path.lock`` while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(target: Path, build: Callable[[Path], None]) -> bool:
    """Make ``target`` with ``build(tmp_path)`` unless it exists; return True if built.

    ``build`` writes to a temporary path in the same folder, which is then
    renamed onto ``target`` (an atomic step on one file system).
    """
    if target.exists():
        return False
    with locked(target):
        if target.exists():
            return False
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
        os.close(fd)
        try:
            build(Path(tmp))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return True
