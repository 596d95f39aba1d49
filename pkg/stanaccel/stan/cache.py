"""The on-disk cache of built Stan programs.

A build is keyed by a hash of everything that changes its output (program
text, bridge source, compiler flags, pybind11 and httpstan versions). Builds of
the same key are serialised with a file lock, and each artefact is written
under a temporary name and renamed into place, so concurrent builds (several
processes, or pytest-xdist workers) never see or leave a half-written file.

Each artefact has a manifest beside it, ``<artefact>.json``, recording its
size and SHA-256 (and, for information, the compiler that built it). The
manifest is written before the artefact is renamed into place, so a crash
never leaves an artefact that looks valid. An artefact is used only if it
matches its manifest; otherwise it is removed and rebuilt, with a warning
naming the file and the reason. A damaged shared library cannot be caught
later: loading one truncated or overwritten on disk (a full disk, a killed
copy, a bad sector) crashes Python with a bus error or a segfault.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# The manifests live in stanaccel.atomic (checkpoints use them too); named here as well.
from stanaccel.atomic import BUILT_AT_FORMAT, damage, file_sha256, manifest_path, write_manifest  # noqa: F401

CACHE_ENV = "STANACCEL_CACHE"

logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    """The cache folder: ``$STANACCEL_CACHE``, else ``$XDG_CACHE_HOME/stanaccel``
    (``~/.cache/stanaccel`` by default), created if missing.

    Raises
    ------
    NotADirectoryError
        The path, or a folder above it, is a file.
    OSError
        The folder cannot be created (no permission, a read-only disk).
    """
    if os.environ.get(CACHE_ENV):
        path, source = Path(os.environ[CACHE_ENV]), f"${CACHE_ENV} = "
    else:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        path, source = Path(base) / "stanaccel", "the cache folder "
    advice = f"set ${CACHE_ENV} to a folder (created if missing) for the compiled Stan programs"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        file = next(p for p in (path, *path.parents) if p.exists() and not p.is_dir())
        raise NotADirectoryError(
            f"{source}{path}: {'it' if file == path else file} is a file, not a folder; {advice}"
        ) from None
    except OSError as error:
        raise OSError(f"{source}{path}: cannot create the folder ({error.strerror}); {advice}") from None
    return path


BUILD_ROOM = 50_000_000
"""Free bytes a program's build wants in the cache folder and in the build folder (``TMPDIR``), checked
before it starts (:func:`check_build_room`): measured, a build of a small program made 1.9 MB in the
build folder (its assembly, object and C++ files) and a library of 2 MB in the cache (the bundled
programs' are 2 to 2.6 MB, the bridge's object 2.7 MB); the rest is margin for larger programs."""


def check_build_room(
    cache: Path, needed_in_cache: int = BUILD_ROOM, needed_in_build: int = BUILD_ROOM
) -> None:
    """Refuse a build that a full disk would fail after its minute of compiling.

    Raises
    ------
    OSError
        With ``errno`` ENOSPC, where the cache folder ``cache`` has less than
        ``needed_in_cache`` bytes free, or the build folder (the temporary
        folder, ``TMPDIR``) less than ``needed_in_build``; the message names
        the folder and what to do.
    """
    build = Path(tempfile.gettempdir())
    places = (
        (cache, needed_in_cache, "the compile cache folder", f"set {CACHE_ENV} to a folder with room"),
        (build, needed_in_build, "the build folder (TMPDIR)", "set TMPDIR to one with room"),
    )
    for folder, needed, what, instead in places:
        free = shutil.disk_usage(folder).free
        if free < needed:
            error = OSError(
                f"{what} {folder} has {free / 1e6:.3g} MB free, and compiling Stan's C++ needs about "
                f"{needed / 1e6:.0f} MB there: make room there, or {instead}"
            )
            error.errno = errno.ENOSPC  # a full disk, not bad input: the command line exits with 1
            raise error


def content_hash(*parts: str) -> str:
    """A short hex digest of the given texts (order matters)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def lock_path(target: Path) -> Path:
    """The lock file serialising builds of ``target``: ``<target>.lock``."""
    return target.with_name(target.name + ".lock")


@contextlib.contextmanager
def locked(target: Path, what: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``<target>.lock`` while the block runs.

    If another process holds it (it is building ``target``), say so before
    waiting: a build takes about a minute, and silence looks like a hang.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = lock_path(target)
    with open(lock, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another process compiling %s (lock %s)", what or target.name, lock)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove(target: Path) -> None:
    """Remove an artefact and its manifest, if present."""
    for path in (target, manifest_path(target)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def build_once(target: Path, build: Callable[[Path], dict[str, str] | None], what: str | None = None) -> bool:
    """Make ``target`` with ``build(tmp_path)`` unless an intact copy exists; return True if built.

    ``build`` writes to a temporary path in the same folder; its manifest is
    written, then the artefact is renamed onto ``target`` (an atomic step on
    one file system). ``build`` may return a dict of text fields to record
    in the manifest (such as the compiler version). A ``target`` that does
    not match its manifest (see :func:`damage`) is removed and rebuilt, with
    a warning. ``what`` names the artefact in the message shown while
    waiting for another process's build.
    """
    if damage(target) is None:
        return False
    with locked(target, what):
        problem = damage(target)
        if problem is None:
            return False
        if problem != "missing":
            logger.warning("cached build of %s is damaged (%s); rebuilding", target, problem)
        _remove(target)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
        os.close(fd)
        try:
            info = build(Path(tmp)) or {}
            write_manifest(target, Path(tmp), info)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return True


def discard(target: Path, reason: str, seen: os.stat_result, what: str | None = None) -> None:
    """Remove a cached artefact that matched its manifest but proved unusable (it did not load).

    ``seen`` is the artefact's ``stat()`` taken before it was tried: if
    another process has replaced the file since (rebuilt it), the new one is
    kept. The next :func:`build_once` rebuilds a removed artefact.
    """
    with locked(target, what):
        try:
            current = target.stat()
        except FileNotFoundError:
            return
        if (current.st_ino, current.st_mtime_ns) != (seen.st_ino, seen.st_mtime_ns):
            return
        logger.warning("cached build of %s is damaged (%s); rebuilding", target, reason)
        _remove(target)
