"""Files that are whole or absent: a kill while writing leaves the previous version.

Checkpoints are rewritten while a run goes on; a write cut short by a kill
must never leave a half file where a whole one was. Each write goes to a
temporary file beside the target, is flushed to disk, and replaces the
target with ``os.replace`` (atomic on one file system).

A checkpoint must also be whole when it is read back: a disk error or a
stray write can damage it after it was written. :func:`write_checked_pickle`
records the file's size and SHA-256 in a manifest beside it, written last,
and :func:`read_checked_pickle` refuses a file that does not match it. The
compile cache (:mod:`stanaccel.stan.cache`) uses the same manifests
(:func:`damage`, :func:`write_manifest`).

Two runs writing one place would overwrite each other's files half way: a
run holds :func:`exclusive_lock` on its output (a workflow's folder, the file
of ``stanaccel sample -o`` or ``nuts -o``) from before its first draw until its last write,
and a second run is refused at once. This module imports nothing else of
stanaccel.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import stat
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def write_bytes(path: Path, payload: bytes | memoryview) -> None:
    """Write ``payload`` to ``path`` atomically, creating its folder.

    A symbolic link at ``path`` is followed: the file it names is replaced,
    the link stays. Where the write fails (a full disk), the temporary file
    is removed and the ``OSError`` raised; ``path`` keeps what it held.
    """
    path = real_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_with(path, lambda temporary: temporary.write_bytes(payload))


def write_with(path: Path, write: Callable[[Path], Any]) -> None:
    """Have ``write`` make the file ``path`` atomically: it writes a temporary file beside it.

    For writers that take a path rather than bytes: a reader never sees the
    file half written, and two processes never write the same file at once.
    A symbolic link at ``path`` is followed. The temporary file is removed if
    ``write`` fails; its exception is raised. Only a regular file is
    replaced: a device, a pipe or a socket at ``path`` (``/dev/null``) raises
    :class:`NotAFile`, since renaming a file onto it would destroy it.
    """
    path = real_path(path)
    check_replaceable(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(temporary)
        with open(temporary, "rb") as file:
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


class NotAFile(OSError):
    """A path to be written names a device, a pipe or a socket, which a written file would replace."""


def check_replaceable(path: str | Path) -> None:
    """Raise :class:`NotAFile` where ``path`` is a device, a pipe or a socket (a symbolic link is followed).

    An output is written by renaming a new file onto its path, which would
    replace a device such as ``/dev/null`` (as root) with a regular file.
    """
    kind = file_kind(path)
    if kind not in (None, "a regular file", "a folder"):  # a folder: the rename fails (Is a directory)
        raise NotAFile(f"{path} is {kind}, not a regular file: it is not replaced; give a file's path")


def file_kind(path: str | Path) -> str | None:
    """What ``path`` names, in words ("a regular file", "a folder", "a character device", ...); None if
    nothing (a symbolic link is followed)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def real_path(path: str | Path) -> Path:
    """``path``, or the file a symbolic link there names (a link to a link followed to its end).

    Writing a file by renaming a new one onto it would replace a link with a
    regular file; writing the link's target keeps the link, as ``open``'s
    writes do.
    """
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


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
    write_pickle(path, value)
    write_manifest(Path(path), Path(path), {})


class CheckpointNotWritten(UserWarning):
    """A checkpoint could not be written (a full disk): the run goes on and keeps its draws in memory."""


def write_checkpoint(path: Path, value: Any) -> bool:
    """:func:`write_checked_pickle`, where a failure to write warns instead of raising; False if it failed.

    A checkpoint is there to resume a run that is stopped; a run whose disk
    fills must not lose its draws over one: it goes on without that
    checkpoint, and its draws are written (or rescued) at the end.
    """
    try:
        write_checked_pickle(path, value)
        return True
    except OSError as error:
        warnings.warn(
            f"could not write a checkpoint in {Path(path).parent} ({error.strerror or error}): the run goes "
            "on and keeps its draws, but cannot resume from this point if it is stopped",
            CheckpointNotWritten,
            stacklevel=2,
        )
        return False


def read_checked_pickle(path: Path) -> Any:
    """What ``path`` holds, if it matches its manifest; else ``ValueError`` naming the file and why."""
    problem = damage(Path(path))
    if problem is not None:
        raise ValueError(f"{path} is damaged ({problem})")
    return read_pickle(path)


def remove_checked(path: Path) -> None:
    """Remove a file written by :func:`write_checked_pickle` and its manifest, if present."""
    for file in (Path(path), manifest_path(Path(path))):
        file.unlink(missing_ok=True)


class OutputInUse(OSError):
    """Another stanaccel run holds the lock on an output (see :func:`exclusive_lock`)."""


@contextlib.contextmanager
def exclusive_lock(lock: Path, what: str, instead: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock``, which names this process id, while the block runs.

    The operating system drops the lock when the process ends, killed or
    not, so a lock is never left behind. The file is removed when the block
    ends (a killed run leaves it, unlocked: the next run takes it). A run
    that opened the file just before it was removed finds, once it holds
    the lock, that the file at ``lock`` is no longer the one it opened, and
    opens the new one.

    Parameters
    ----------
    lock : Path
        The lock file, created if absent (its folder must exist).
    what : str
        The output it guards, for the message: ``"output folder out"``.
    instead : str
        What to give a second run instead: ``"another output folder (--output)"``.

    Raises
    ------
    OutputInUse
        Another process holds the lock; the message names ``what`` and that process's id.
    """
    while True:
        try:
            handle = open(lock, "a+")  # noqa: SIM115 (closed below, after the block and the unlink)
        except OSError as error:
            raise _lock_failed(lock, what, error) from error
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            other = handle.read().strip() or "unknown"
            handle.close()
            raise OutputInUse(
                f"{what} is in use by another stanaccel run (pid {other}); wait for it "
                f"to end, or give this run {instead}"
            ) from None
        if _same_file(handle, lock):
            break
        handle.close()  # the file was removed by the run that held it, after this one opened it: again
    try:
        try:
            handle.seek(0)
            handle.truncate()
            os.write(handle.fileno(), f"{os.getpid()}\n".encode())  # unbuffered: close() writes nothing more
        except OSError as error:
            raise _lock_failed(lock, what, error) from error
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)  # still holding the lock: a run that opened the file then finds it gone
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _lock_failed(lock: Path, what: str, error: OSError) -> OSError:
    """The error of a lock file that cannot be made or written (a full disk), naming it; ``errno`` kept."""
    failed = OSError(
        f"cannot write {lock}, the lock file of {what} ({error.strerror or error}): make room on its disk, "
        "or write the output elsewhere"
    )
    failed.errno = error.errno  # a full disk is told apart from bad input (the command line's exit status)
    return failed


def _same_file(handle: Any, path: Path) -> bool:
    """Whether the open file ``handle`` is still the file at ``path`` (not removed or replaced)."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


# The manifests, shared with the compile cache (stanaccel.stan.cache): an artefact is used
# only if it matches the size and SHA-256 recorded beside it.


def file_sha256(path: Path) -> str:
    """The SHA-256 hex digest of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


BUILT_AT_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
"""How a manifest writes when its artefact was built (``built_at``, local time with its offset)."""


def manifest_path(target: Path) -> Path:
    """Where the manifest of the artefact ``target`` lives: ``<target>.json``."""
    return target.with_name(target.name + ".json")


def damage(target: Path) -> str | None:
    """Why the cached artefact ``target`` cannot be used, or None if it matches its manifest.

    Returns "missing" if there is no artefact at all (not yet built).
    """
    if not target.exists():
        return "missing"
    try:
        record = json.loads(manifest_path(target).read_text())
        size, sha256 = record["size"], record["sha256"]
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable manifest: {exc!r}"
    actual_size = target.stat().st_size
    if actual_size != size:
        return f"size {actual_size} != {size}"
    actual_sha256 = file_sha256(target)
    if actual_sha256 != sha256:
        return f"SHA-256 {actual_sha256[:16]}... != {str(sha256)[:16]}..."
    return None


def write_manifest(target: Path, built: Path, info: dict[str, str]) -> None:
    """Record the size and SHA-256 of ``built`` (the artefact to become ``target``)."""
    record = {
        "artefact": target.name,
        "size": built.stat().st_size,
        "sha256": file_sha256(built),
        "built_at": time.strftime(BUILT_AT_FORMAT),
        **info,
    }
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, indent=1)
        os.replace(tmp, manifest_path(target))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
