"""Output files under faults: rescue files, whole writes, symbolic links, lock files, checkpoints.

A full disk itself is made in ``tests/workflow/test_faults.py`` (a small
tmpfs); these tests fail a write by a folder where the file should go, or by
a place no one can write (``/proc``), and need no Stan.
"""

import errno
import json
import os
import stat
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import pytest

from stanaccel.atomic import CheckpointNotWritten, NotAFile, OutputInUse, exclusive_lock, write_bytes
from stanaccel.densities import FunctionDensity
from stanaccel.diagnostics import to_inference_data
from stanaccel.diagnostics._arviz import az
from stanaccel.diagnostics.files import (
    OutputError,
    check_writable,
    json_text,
    netcdf_bytes,
    save_netcdf,
    write_or_rescue,
)
from stanaccel.errors import OutputFailed
from stanaccel.kernels import RandomWalkMetropolis, run_chains
from stanaccel.stan.cache import check_build_room

UNWRITABLE = "/proc/stanaccel-no-such-place/fit.nc"  # /proc refuses new files, even to root


@pytest.fixture
def idata():
    draws = np.random.default_rng(0).standard_normal((2, 50, 3))
    groups = to_inference_data({"posterior": {"x": draws}, "sample_stats": {"depth": np.ones((2, 50), int)}})
    return az.InferenceData(  # attributes at its root too
        posterior=groups.posterior, sample_stats=groups.sample_stats, attrs={"program": "p"}
    )


def test_the_file_made_in_memory_is_what_arviz_writes(idata, tmp_path):
    ours = tmp_path / "ours.nc"
    ours.write_bytes(netcdf_bytes(idata))
    arviz = tmp_path / "arviz.nc"
    idata.to_netcdf(str(arviz))
    back, theirs = az.from_netcdf(str(ours)), az.from_netcdf(str(arviz))
    assert back.groups() == theirs.groups() and back.attrs == theirs.attrs == {"program": "p"}
    np.testing.assert_array_equal(back.posterior["x"].values, theirs.posterior["x"].values)
    np.testing.assert_array_equal(back.sample_stats["depth"].values, theirs.sample_stats["depth"].values)
    # floating point stored as it is (zlib saved 6% of a posterior's draws, at 7x the time); integers zipped
    assert back.posterior["x"].encoding.get("zlib", False) is False
    assert back.sample_stats["depth"].encoding["zlib"] is True


def test_two_rescues_of_one_name_in_one_second_are_two_files(idata, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    payload = netcdf_bytes(idata)
    first = write_or_rescue(payload, UNWRITABLE)
    second = write_or_rescue(payload, UNWRITABLE.replace("no-such-place", "another-place"))
    assert first.rescued and second.rescued and first.path != second.path
    assert first.path.parent == second.path.parent == tmp_path
    assert first.path.name.startswith("fit-rescued-") and str(os.getpid()) in first.path.name
    assert first.asked == __import__("pathlib").Path(UNWRITABLE) and first.problem
    for written in (first, second):
        np.testing.assert_array_equal(
            az.from_netcdf(str(written.path)).posterior["x"].values, idata.posterior["x"].values
        )


def test_a_rescue_goes_to_the_output_folder_first(idata, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    blocked = tmp_path / "fit.nc"
    blocked.mkdir()
    written = write_or_rescue(netcdf_bytes(idata), blocked)
    assert written.rescued and written.path.parent == tmp_path and "directory" in written.problem


def test_nowhere_to_write_is_said(idata, monkeypatch):
    monkeypatch.chdir("/proc")
    monkeypatch.setattr("tempfile.gettempdir", lambda: "/proc")  # a temporary folder as full as the rest
    with pytest.raises(OutputFailed, match="draws are lost") as caught:
        write_or_rescue(netcdf_bytes(idata), UNWRITABLE)
    assert "/proc" in str(caught.value) and isinstance(caught.value, OSError)


def test_save_follows_a_symbolic_link(idata, tmp_path):
    target = tmp_path / "results" / "fit.nc"
    target.parent.mkdir()
    target.write_bytes(b"an older fit")
    link = tmp_path / "fit.nc"
    link.symlink_to(target)
    assert save_netcdf(idata, link) == link
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert az.from_netcdf(str(target)).posterior["x"].shape == (2, 50, 3)


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    (tmp_path / "fit.nc").mkdir()
    with pytest.raises(OSError):
        write_bytes(tmp_path / "fit.nc", b"draws")
    assert [p.name for p in tmp_path.iterdir()] == ["fit.nc"]


def test_the_lock_file_goes_with_the_lock(tmp_path):
    lock = tmp_path / ".fit.nc.lock"
    with exclusive_lock(lock, "output file fit.nc", "another output file (-o)"):
        assert lock.read_text() == f"{os.getpid()}\n"
        with pytest.raises(OutputInUse, match=f"pid {os.getpid()}"):
            with exclusive_lock(lock, "output file fit.nc", "-"):
                pass
    assert not lock.exists()
    with exclusive_lock(lock, "output file fit.nc", "-"):  # and it is taken again
        assert lock.is_file()


def test_a_run_that_cannot_checkpoint_goes_on_and_keeps_its_draws(tmp_path):
    density = FunctionDensity(2, lambda x: -0.5 * float(x @ x))
    kernel = RandomWalkMetropolis(density, scale=0.5)
    (tmp_path / "chain-0.pkl").mkdir()  # where chain 0's checkpoint goes: its write fails
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per message: not at every checkpoint of every chain
        run = run_chains(
            kernel, np.zeros((2, 2)), 200, seed=1, progress=False, checkpoint=tmp_path, checkpoint_seconds=0
        )
    assert run.positions.shape == (2, 200, 2) and not run.interrupted
    [warning] = [w for w in caught if issubclass(w.category, CheckpointNotWritten)]
    assert f"could not write a checkpoint in {tmp_path}" in str(warning.message)


def test_a_device_or_pipe_is_never_replaced_by_a_written_file(idata, tmp_path):
    # As root, `-o /dev/null` renamed a file onto /dev/null; a named pipe stands in for a device (no root).
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(NotAFile, match=f"{pipe} is a named pipe, not a regular file: it is not replaced"):
        write_bytes(pipe, b"draws")
    with pytest.raises(OutputError, match=f"cannot write {pipe}: {pipe} is a named pipe"):
        save_netcdf(idata, pipe)  # what a user's result.save(path) does
    with pytest.raises(OutputError, match=f"output {pipe} is a named pipe, not a file"):
        check_writable(pipe)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_an_output_the_folder_of_which_takes_no_file_says_so():
    # /proc/self/comm exists and its owner may write it, but /proc/self takes no new file.
    said = r"cannot write output /proc/self/comm: its folder /proc/\d+ takes no new file \(.+\); an output"
    with pytest.raises(OutputError, match=said):
        check_writable("/proc/self/comm")


def test_metrics_are_written_as_strict_json():
    text = json_text({"rhat_max": float("nan"), "ess": [np.float64("inf"), 1.5], "n": np.int64(3)})
    assert json.loads(text, parse_constant=pytest.fail) == {"rhat_max": None, "ess": [None, 1.5], "n": 3}


def test_a_build_that_a_full_disk_would_fail_is_refused_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the build folder: TMPDIR
    with pytest.raises(OSError, match=f"the compile cache folder {tmp_path} has .* MB free, and compiling "
                       r"Stan's C\+\+ needs about 1000000000000 MB there: make room there, or set "
                       "STANACCEL_CACHE to a folder with room") as caught:  # fmt: skip
        check_build_room(tmp_path, needed_in_cache=10**18)
    assert caught.value.errno == errno.ENOSPC  # the command line's exit status 1: the disk's, not bad input
    with pytest.raises(OSError, match=f"the build folder \\(TMPDIR\\) {tmp_path} has .*set TMPDIR to one"):
        check_build_room(tmp_path, needed_in_build=10**18)
    check_build_room(tmp_path, needed_in_cache=1, needed_in_build=1)


LOCK_ON_A_FULL_DISK = """
import pathlib, sys
from stanaccel.atomic import exclusive_lock
try:
    with exclusive_lock(pathlib.Path(sys.argv[1]) / ".fit.nc.lock", "output file fit.nc", "-"):
        pass
except OSError as error:
    print(error.errno, error)
"""
"""Take an output's lock in the folder $1 and print the error: its number, its message."""


def _can_mount() -> bool:
    try:
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
        )
        return done.returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not _can_mount(), reason="needs unshare --user --mount (user namespaces) to fill a disk")
def test_a_lock_file_that_a_full_disk_refuses_is_named(tmp_path):
    # It said "[Errno 28] No space left on device", naming nothing: the lock file's closing wrote it again.
    fill = 'mount -t tmpfs -o size=1m tmpfs "$1" && head -c 1048576 /dev/zero > "$1/filler"; shift; "$@"'
    command = [sys.executable, "-c", LOCK_ON_A_FULL_DISK, str(tmp_path)]
    namespace = ["unshare", "--user", "--map-root-user", "--mount"]
    done = subprocess.run(
        [*namespace, "sh", "-c", fill, "sh", str(tmp_path), *command], capture_output=True, text=True
    )
    assert done.stdout == (
        f"{errno.ENOSPC} cannot write {tmp_path / '.fit.nc.lock'}, the lock file of output file fit.nc (No "
        "space left on device): make room on its disk, or write the output elsewhere\n"
    ), done.stderr
