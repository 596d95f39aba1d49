"""Output files under faults: rescue files, whole writes, symbolic links, lock files, checkpoints.

A full disk itself is made in ``tests/workflow/test_faults.py`` (a small
tmpfs); these tests fail a write by a folder where the file should go, or by
a place no one can write (``/proc``), and need no Stan.
"""

import os
import warnings

import numpy as np
import pytest

from stanaccel.atomic import CheckpointNotWritten, OutputInUse, exclusive_lock, write_bytes
from stanaccel.densities import FunctionDensity
from stanaccel.diagnostics import to_inference_data
from stanaccel.diagnostics._arviz import az
from stanaccel.diagnostics.files import netcdf_bytes, save_netcdf, write_or_rescue
from stanaccel.errors import OutputFailed
from stanaccel.kernels import RandomWalkMetropolis, run_chains

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
