"""Nothing lost under faults: unwritable outputs, Ctrl-C in real subprocesses, continuing a saved run."""

import _thread
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stanaccel.atomic import exclusive_lock, write_with
from stanaccel.cli import main
from stanaccel.datasets import generate
from stanaccel.diagnostics import to_inference_data
from stanaccel.diagnostics._arviz import az
from stanaccel.diagnostics.files import OutputError, save_netcdf, save_or_rescue
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.stan import StanModel, write_data
from stanaccel.stan.nuts import WarmupState, sample_nuts
from stanaccel.workflow import run_workflow

UNWRITABLE = "/proc/stanaccel-no-such-place/fit.nc"  # /proc refuses new files, even to root


@pytest.fixture(scope="module")
def mvn_data_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "mvn.json"
    return write_data(path, generate("mvn_mean", N=10, D=2, seed=1).data)


@pytest.mark.parametrize("where", ["folder", UNWRITABLE])
def test_unwritable_output_is_refused_before_compiling(tmp_path, monkeypatch, capsys, mvn_data_file, where):
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("STANACCEL_CACHE", str(cache))
    output = tmp_path if where == "folder" else where
    code = main(["nuts", "mvn_mean", "--data", str(mvn_data_file), "-o", str(output), "-q"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(output) in err and ("is a folder" in err or "cannot create" in err)
    assert "iterations" not in err  # no sampling announced
    assert not cache.exists()  # nothing compiled or even looked up


def test_draws_go_to_a_rescue_file_when_the_output_cannot_be_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    draws = np.random.default_rng(0).standard_normal((2, 50))
    idata = to_inference_data({"posterior": {"x": draws}})
    with pytest.raises(OutputError, match=f"cannot write {UNWRITABLE}"):
        save_netcdf(idata, UNWRITABLE)  # what a user's save() does: no redirect
    written = save_or_rescue(idata, UNWRITABLE)  # what the command line and workflows do
    assert written.path.parent == tmp_path and written.path.name.startswith("fit-rescued-")
    np.testing.assert_array_equal(az.from_netcdf(str(written.path)).posterior["x"].values, draws)


@pytest.mark.parametrize("command", ["nuts", "sample"])
def test_a_second_run_on_the_same_output_file_is_refused_at_once(tmp_path, capsys, mvn_data_file, command):
    out = tmp_path / "out" / "same.nc"
    out.parent.mkdir()
    out.write_bytes(b"\x89HDF\r\n\x1a\n: the first run's file")
    with exclusive_lock(out.with_name(".same.nc.lock"), "the first run", "-"):
        code = main([command, "mvn_mean", "--data", str(mvn_data_file), "-q", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"stanaccel {command}: error: output file {out} is in use by another stanaccel run "
        f"(pid {os.getpid()}); wait for it to end, or give this run another output file (-o)\n"
    )
    assert out.read_bytes() == b"\x89HDF\r\n\x1a\n: the first run's file"


SHORT = ["--chains", "1", "--warmup", "20", "--draws", "20", "-q"]
"""A run short enough that a test whose output is not refused, as it must be, fails within a second."""


@pytest.mark.parametrize("given", ["program", "data", "data by a link", "config", "warmup-from", "metrics"])
def test_an_output_that_is_one_of_the_runs_inputs_is_refused(
    tmp_path, capsys, mvn_program, mvn_data_file, given
):
    # a copy of mvn_mean of its name (its build is the cached one); x.nc puts its metrics in x.metrics.json
    program, data = tmp_path / "mvn_mean.stan", tmp_path / "x.metrics.json"
    config = tmp_path / "settings.toml"
    program.write_text(mvn_program.code)
    data.write_bytes(mvn_data_file.read_bytes())
    config.write_text("method = 'mh'\n")
    earlier, link = tmp_path / "earlier.txt", tmp_path / "link.json"
    earlier.write_text("not a run's file\n")
    link.symlink_to(data)
    inputs = ["--data", str(link if given == "data by a link" else data), "--config", str(config)]
    output, said = {
        "program": (
            program,
            f"output {program} is the Stan program: writing it would replace your Stan program",
        ),
        "data": (data, f"output {data} is the data file: writing it would replace your data file"),
        "data by a link": (data, f"output {data} is the data file ({link}): writing it"),
        "config": (config, f"output {config} is the --config file: writing it would replace your --config"),
        "warmup-from": (earlier, f"output {earlier} is the --warmup-from file: writing it would replace"),
        "metrics": (
            tmp_path / "x.nc",
            f"metrics file {data} is the data file: writing it would replace your",
        ),
    }[given]
    before = {path: path.read_bytes() for path in (program, data, config, earlier)}
    borrowed = ["--warmup-from", str(earlier)] if given == "warmup-from" else []
    code = main(["sample", str(program), *inputs, *borrowed, *SHORT, "-o", str(output)])
    err = capsys.readouterr().err
    assert code == 2 and f"stanaccel sample: error: {said}" in err and "give another output file (-o)" in err
    assert {path: path.read_bytes() for path in before} == before and not (tmp_path / "x.nc").exists()


@pytest.mark.parametrize("kind", ["named pipe", "text file", "empty name"])
def test_an_output_that_is_no_earlier_runs_file_is_refused(
    tmp_path, monkeypatch, capsys, mvn_program, mvn_data_file, kind
):
    # A named pipe stands in for a device: as root, `-o /dev/null` replaced /dev/null by a file.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    if kind == "named pipe":
        os.mkfifo(out)
    elif kind == "text file":
        out.write_text("my notes\n")
    given = "" if kind == "empty name" else str(out)
    code = main(["nuts", "mvn_mean", "--data", str(mvn_data_file), *SHORT, "-o", given])
    err = capsys.readouterr().err
    said = {
        "named pipe": f"output {out} is a named pipe, not a file: an output is written by renaming a new",
        "text file": f"output {out} exists and is a text file beginning 'my notes', not a netCDF file of an "
        f"earlier run: writing the output would replace it; give another output file (-o), or remove {out}",
        "empty name": "--output (-o) is empty: give a file name, or leave the option out for mvn_mean-nuts",
    }[kind]
    assert code == 2 and f"stanaccel nuts: error: {said}" in err
    assert [p.name for p in tmp_path.iterdir()] == ([] if kind == "empty name" else ["out"])
    assert kind != "named pipe" or stat.S_ISFIFO(os.stat(out).st_mode)
    assert kind != "text file" or out.read_text() == "my notes\n"


def test_a_run_on_a_link_to_an_output_in_use_is_refused(tmp_path, capsys, mvn_program, mvn_data_file):
    target, link = tmp_path / "fit.nc", tmp_path / "link.nc"
    link.symlink_to(target)
    with exclusive_lock(tmp_path / ".fit.nc.lock", "the first run", "-"):  # a run on fit.nc holds it
        code = main(["nuts", "mvn_mean", "--data", str(mvn_data_file), *SHORT, "-o", str(link)])
    err = capsys.readouterr().err
    assert code == 2 and f"output file {link} is in use by another stanaccel run (pid {os.getpid()})" in err
    assert not target.exists()


@contextlib.contextmanager
def _ctrl_c_once_chains_run(chains: int, after: float = 0.1) -> Iterator[None]:
    """Ctrl-C to the main thread ``after`` s once ``chains`` of Stan's chains run (in threads named
    "Thread-N (run)"), and never once the block has ended."""
    ended = threading.Event()

    def watch():
        while not ended.is_set():
            if sum(thread.name.endswith("(run)") for thread in threading.enumerate()) >= chains:
                if not ended.wait(after):
                    _thread.interrupt_main()
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        ended.set()
        watcher.join()


def test_nuts_stopped_in_its_warmup_keeps_its_warmup_draws(tmp_path, reject_program, sigint_handled):
    # A program with generated quantities: assembling their 0 draws raised "cannot reshape array of size 0",
    # and `stanaccel nuts` said so (exit status 2) and wrote nothing.
    with _ctrl_c_once_chains_run(2):
        fit = sample_nuts(StanModel(reject_program), chains=2, warmup=10**8, draws=10, progress=False)
    assert fit.interrupted and fit.num_draws == 0 and not fit.adapted
    idata = az.from_netcdf(str(save_netcdf(to_inference_data(fit), tmp_path / "fit.nc")))
    assert idata.posterior.sizes["draw"] == 0 and idata.warmup_posterior.sizes["draw"] > 0


def test_the_metrics_of_a_run_stopped_in_its_warmup_say_it_has_no_draws(
    mvn_program, mvn_data, sigint_handled
):
    with _ctrl_c_once_chains_run(2):
        result = sample(mvn_program, mvn_data, "nuts", {"chains": 2, "warmup": 10**8}, progress=False)
    assert result.interrupted and result.num_draws == 0
    for measure, verb in ((result.metrics, "measure"), (result.summary, "summarise")):
        with pytest.raises(
            ValueError, match=f"no draws to {verb}: the run was stopped before its first kept"
        ):
            measure()  # a ZeroDivisionError, and ArviZ's "Too few elements for interval calculation"


def test_stopped_nuts_says_how_many_draws_it_dropped_to_keep_its_chains_equal(
    tmp_path, capsys, mvn_program, mvn_data_file, sigint_handled
):
    out = tmp_path / "fit.nc"
    command = ["nuts", "mvn_mean", "--data", str(mvn_data_file), "--chains", "2", "--warmup", "100"]
    with _ctrl_c_once_chains_run(2):
        code = main([*command, "--draws", "100000000", "-q", "-o", str(out)])
    err = capsys.readouterr().err
    draws = az.from_netcdf(str(out)).posterior.sizes["draw"]
    # Two chains, each in its own thread some thousands of draws in, stop with equal draws by rare chance.
    assert code == 130 and re.search(
        f"interrupted: wrote {re.escape(str(out))} with {draws} draws per chain \\(the faster chains' "
        "[1-9][0-9]* draws beyond the slowest chain's were dropped to keep them equal\\)",
        err,
    ), err


def test_sample_keeps_its_draws_in_a_rescue_file_when_its_output_cannot_be_written(
    tmp_path, monkeypatch, capsys, mvn_program, mvn_data_file
):
    from stanaccel.sampling import engine

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out" / "same.nc"
    real_sample = engine.sample

    def sample_then_block_the_output(*args, **kwargs):
        result = real_sample(*args, **kwargs)
        out.mkdir()  # a folder where the file should go: renaming onto it fails, even for root
        return result

    monkeypatch.setattr(engine, "sample", sample_then_block_the_output)
    args = ["sample", "mvn_mean", "--data", str(mvn_data_file), "--chains", "2", "--warmup", "150"]
    code = main([*args, "--draws", "200", "-q", "-o", str(out)])
    err = capsys.readouterr().err
    [rescue] = out.parent.glob("same-rescued-*.nc")  # beside the output, the first place tried
    assert code == 1
    assert f"stanaccel sample: could not write {out} (Is a directory); wrote the draws to {rescue}" in err
    assert "Traceback" not in err
    posterior = az.from_netcdf(str(rescue)).posterior
    assert (posterior.sizes["chain"], posterior.sizes["draw"]) == (2, 200)
    assert rescue.with_name(rescue.name.removesuffix(".nc") + ".metrics.json").is_file()
    assert not [p.name for p in (*tmp_path.iterdir(), *out.parent.iterdir()) if p.name.endswith(".tmp")]


FULL_DISK = """
mount -t tmpfs -o size=1m tmpfs "$1"
cp "$2" "$1/data.json"
head -c $(( $(df -k --output=avail "$1" | tail -n 1) * 1024 - 196608 )) /dev/zero > "$1/filler"
cd "$1" && shift 2 && "$@"
"""
"""Mount a 1 MB tmpfs at $1 (in a mount namespace of its own), copy the data file $2 there, fill it to
192 kB of room (the output's check, which writes 64 kB, passes; the draws, 640 kB, do not fit), and run
the rest of the command line in it: a working folder on a disk that fills during the run."""


NAMESPACE = ["unshare", "--user", "--map-root-user", "--mount"]
"""A mount namespace where this user may mount a tmpfs (no root needed where user namespaces are on)."""


def _can_mount() -> bool:
    try:
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
        )
    except OSError:
        return False
    return done.returncode == 0


@pytest.mark.skipif(
    not _can_mount(), reason="needs unshare --user --mount (user namespaces) to make a full disk"
)
@pytest.mark.slow
def test_sample_on_a_full_disk_rescues_its_draws_in_the_temporary_folder(
    tmp_path, mvn_program, mvn_data_file
):
    """The output and working folder on a full disk (HDF5 writing there crashed the process, rc 139)."""
    disk, temporary = tmp_path / "disk", tmp_path / "tmp"
    disk.mkdir()
    temporary.mkdir()
    command = [*CLI, "sample", "mvn_mean", "--data", "data.json", "--method", "mh", "--chains", "2",
               "--warmup", "100", "--draws", "20000", "-q", "-o", "fit.nc"]  # fmt: skip
    done = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            FULL_DISK,
            "sh",
            str(disk),
            str(mvn_data_file),
            *command,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(temporary)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [rescue] = temporary.glob("fit-rescued-*.nc")
    assert (
        f"stanaccel sample: could not write fit.nc (No space left on device); wrote the draws to {rescue}"
        in done.stderr
    )
    assert f"wrote {rescue}" in done.stdout and "Traceback" not in done.stderr
    posterior = az.from_netcdf(str(rescue)).posterior
    assert (posterior.sizes["chain"], posterior.sizes["draw"]) == (2, 20000)
    assert rescue.with_name(rescue.name.removesuffix(".nc") + ".metrics.json").is_file()


@pytest.mark.skipif(
    not _can_mount(), reason="needs unshare --user --mount (user namespaces) to make a full disk"
)
@pytest.mark.slow
def test_an_output_on_a_full_disk_is_refused_before_the_run_naming_its_folder(
    tmp_path, mvn_program, mvn_data_file
):
    """It said "[Errno 28] No space left on device", naming nothing (from writing the output's lock file)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    fill = 'mount -t tmpfs -o size=1m tmpfs "$1" && head -c 1048576 /dev/zero > "$1/filler"; shift; "$@"'
    command = [*CLI, "nuts", "mvn_mean", "--data", str(mvn_data_file), "-q", "-o", str(disk / "fit.nc")]
    done = subprocess.run(
        [*NAMESPACE, "sh", "-c", fill, "sh", str(disk), *command], capture_output=True, text=True
    )
    assert done.returncode == 1, done.stderr  # the disk's fault, not bad input (2)
    assert done.stderr == (
        f"stanaccel nuts: error: cannot write output {disk / 'fit.nc'}: the disk of {disk} is full (No space "
        "left on device; 0 MB free); make room there, or write the output on another disk\n"
    )


def test_a_failed_write_leaves_the_previous_file_whole(tmp_path):
    path = tmp_path / "fit.nc"
    path.write_bytes(b"whole")

    def write_half(temporary):
        temporary.write_bytes(b"ha")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_with(path, write_half)
    assert path.read_bytes() == b"whole" and [p.name for p in tmp_path.iterdir()] == ["fit.nc"]


def _interrupt(
    command: list[str],
    marker: str,
    delay: float,
    timeout: float = 180,
    group: bool = False,
    signum: int = signal.SIGINT,
) -> tuple[int, str]:
    """Run ``command``, send ``signum`` ``delay`` s after ``marker`` is in its output; return (code, output).

    ``group``: signal its whole process group, its worker processes too, as a terminal's Ctrl-C does
    (and ``timeout``, and SLURM, with SIGTERM).
    """

    def start():
        if group:
            os.setpgrp()
        # A shell that starts pytest in the background (or nohup) makes it ignore SIGINT (SIGHUP), which
        # children inherit.
        for stop in (signal.SIGINT, signal.SIGHUP):
            signal.signal(stop, signal.SIG_DFL)

    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=start
    )
    lines, deadline = [], time.monotonic() + timeout
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            break
        assert time.monotonic() < deadline, "".join(lines)
    else:
        process.wait()
        pytest.fail(f"{marker!r} never appeared; exit {process.returncode}:\n{''.join(lines)}")
    time.sleep(delay)
    if group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    rest, _ = process.communicate(timeout=timeout)
    return process.returncode, "".join(lines) + rest


CLI = [sys.executable, "-m", "stanaccel.cli"]
INTO_THE_PHASE = 0.5
"""Seconds from the line that opens a phase (warm-up, sampling) to the SIGINT: the run is in that phase,
with draws to keep (hundreds at least, on a busy machine, for these cheap runs), and every second more
is a second of two cores sampling what no test reads."""


@pytest.mark.parametrize(("phase", "signum"), [("warmup", signal.SIGINT), ("sampling", signal.SIGHUP)])
@pytest.mark.slow
def test_stopped_nuts_writes_its_draws_and_says_how(tmp_path, mvn_program, mvn_data_file, phase, signum):
    """Ctrl-C, or SIGHUP (a closed terminal): the draws made so far are written, and the exit status says."""
    out = tmp_path / "fit.nc"
    lengths = ["--warmup", "100000000", "--draws", "10"] if phase == "warmup" else ["--warmup", "100"]
    lengths += [] if phase == "warmup" else ["--draws", "100000000"]
    command = [*CLI, "nuts", "mvn_mean", "--data", str(mvn_data_file), "--chains", "2", "-q", "-o", str(out)]
    code, output = _interrupt([*command, *lengths], "iterations", delay=INTO_THE_PHASE, signum=signum)
    assert code == 128 + signum, output
    said = "interrupted" if signum == signal.SIGINT else "stopped by SIGHUP"
    assert f"{said}: wrote {out} with" in output
    assert "Traceback" not in output and "error" not in output.lower() and "Warning" not in output
    posterior = az.from_netcdf(str(out))
    draws = posterior.posterior.sizes["draw"]
    if phase == "warmup":
        assert draws == 0 and "not adapted" in output
        assert posterior.warmup_posterior.sizes["draw"] > 0
        with pytest.raises(ValueError, match="stopped before adaptation finished"):
            WarmupState.from_netcdf(out)
    else:
        assert draws > 0 and f"with {draws} draws per chain" in output


def test_continuing_from_a_saved_run_needs_no_new_warmup(tmp_path, mvn_program, mvn_data_file, capsys):
    first = tmp_path / "first.nc"
    args = ["nuts", "mvn_mean", "--data", str(mvn_data_file), "--chains", "2", "-q", "--seed", "4"]
    assert main([*args, "--warmup", "300", "--draws", "50", "-o", str(first)]) == 0
    saved = az.from_netcdf(str(first))
    second = tmp_path / "second.nc"
    assert main([*args, "--draws", "200", "--warmup-from", str(first), "-o", str(second)]) == 0
    assert "0 warm-up" in capsys.readouterr().err
    continued = az.from_netcdf(str(second))
    assert (continued.posterior.sizes["chain"], continued.posterior.sizes["draw"]) == (2, 200)
    assert "warmup_posterior" not in continued.groups()
    np.testing.assert_allclose(continued.adaptation["step_size"], saved.adaptation["step_size"])
    np.testing.assert_allclose(continued.sample_stats["step_size"][:, 0], saved.adaptation["step_size"])

    fit = sample_nuts(StanModel(mvn_program, mvn_data_file), warmup_from=first, draws=100, progress=False)
    assert fit.warmup_unconstrained.shape[1] == 0 and fit.num_draws == 100
    assert fit.sample_stats["n_steps"].sum() < 100 * 2 * 8  # adapted: short trajectories from the start
    np.testing.assert_allclose(fit.inv_metric, saved.adaptation["inv_metric"])


def test_continuing_from_another_programs_run_is_refused(tmp_path, mvn_model, gp_model):
    fit = sample_nuts(gp_model, chains=1, warmup=100, draws=10, progress=False)
    path = tmp_path / "gp.nc"
    save_netcdf(to_inference_data(fit), path)
    with pytest.raises(ValueError, match="same program"):
        sample_nuts(mvn_model, warmup_from=path, progress=False)


INTERRUPTED_WORKFLOW = """
[workflow]
name = "long"
seed = 3

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2

[[steps]]
name = "nuts"
action = "nuts"
program = "mvn_mean"
data = "data"
chains = 2
warmup = 100
draws = 100000000

[[steps]]
name = "after"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2
"""


@pytest.mark.slow
def test_interrupted_workflow_stops_and_records_it(tmp_path, mvn_program):
    path = tmp_path / "long.toml"
    path.write_text(INTERRUPTED_WORKFLOW)
    out = tmp_path / "out"
    code, output = _interrupt(
        [*CLI, "run", str(path), "-o", str(out), "-q"], "NUTS on", delay=INTO_THE_PHASE, signum=signal.SIGTERM
    )
    assert code == 143, output
    assert "interrupted: step 'nuts' stopped by SIGTERM" in output and " done" not in output
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted" and record["interrupted_step"] == "nuts"
    assert [(s["name"], s["status"]) for s in record["steps"]] == [("data", "done"), ("nuts", "interrupted")]
    assert not (out / "after").exists()
    assert az.from_netcdf(str(out / "nuts" / "posterior.nc")).posterior.sizes["draw"] > 0


SHORT_WORKFLOW = INTERRUPTED_WORKFLOW.replace("draws = 100000000", "draws = 200")


@pytest.mark.parametrize("step", ["nuts", "sample"])
def test_a_workflow_whose_draws_cannot_be_written_says_where_they_went(tmp_path, mvn_program, capsys, step):
    path = tmp_path / "w.toml"
    workflow = (
        SHORT_WORKFLOW if step == "nuts" else SHORT_WORKFLOW.replace('action = "nuts"', 'action = "sample"')
    )
    path.write_text(workflow)
    out = tmp_path / "out"
    (out / "nuts" / "posterior.nc").mkdir(parents=True)  # a folder where the draws should go
    code = main(["run", str(path), "-o", str(out), "-q"])
    err = capsys.readouterr().err
    [rescue] = (out / "nuts").glob("posterior-rescued-*.nc")
    assert code == 1, err
    assert (
        f"step 'nuts': could not write {out / 'nuts' / 'posterior.nc'} (Is a directory); its draws are in "
        f"{rescue}" in err
    )
    assert az.from_netcdf(str(rescue)).posterior.sizes["draw"] == 200
    assert not (out / "after").exists()  # the workflow stopped there


def test_cli_continuing_from_another_programs_run_is_refused(tmp_path, gp_model, mvn_data_file, capsys):
    fit = sample_nuts(gp_model, chains=1, warmup=100, draws=10, progress=False)
    path = save_netcdf(to_inference_data(fit), tmp_path / "gp.nc")
    code = main(["nuts", "mvn_mean", "--data", str(mvn_data_file), "--warmup-from", str(path), "-q"])
    assert code == 2 and "is it the same program?" in capsys.readouterr().err


@pytest.mark.parametrize(("method", "signum"), [("mh", signal.SIGTERM), ("stt", signal.SIGINT)])
@pytest.mark.slow
def test_stopped_sample_writes_its_draws_and_says_how(tmp_path, mvn_program, mvn_data_file, method, signum):
    """Ctrl-C, or SIGTERM (kill, timeout, SLURM, docker stop): the draws made so far are written."""
    out = tmp_path / "fit.nc"
    command = [*CLI, "sample", "mvn_mean", "--data", str(mvn_data_file), "--method", method, "--chains", "2",
               "--warmup", "100", "--draws", "2000000", "-q", "-o", str(out)]  # fmt: skip
    code, output = _interrupt(command, "draws", delay=INTO_THE_PHASE, signum=signum)
    assert code == 128 + signum, output
    assert "Traceback" not in output and "Warning" not in output
    assert out.is_file(), output
    draws = az.from_netcdf(str(out)).posterior.sizes["draw"]
    said = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
    assert draws > 0 and f"{said}: wrote {out} with {draws} draws per chain" in output


KILLED_WORKFLOW = """
[workflow]
name = "killed"
seed = 3

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2

[[steps]]
name = "sample"
action = "sample"
method = "mh"
program = "mvn_mean"
data = "data"
chains = 2
warmup = 100
draws = 20000
"""


@pytest.mark.slow
def test_a_killed_workflow_resumes_its_sample_step_to_the_same_draws(tmp_path, mvn_program):
    """SIGKILL mid-sampling (after the first checkpoints), rerun: the draws of a run never killed."""
    path = tmp_path / "killed.toml"
    path.write_text(KILLED_WORKFLOW)
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    often = {**os.environ, "STANACCEL_CHECKPOINT_SECONDS": "0.2"}
    process = subprocess.Popen(
        [*CLI, "run", str(path), "-o", str(killed), "-q"], stdout=subprocess.DEVNULL, env=often
    )
    checkpoints = killed / "sample" / "checkpoints" / "chains"
    deadline = time.monotonic() + 120
    while len(list(checkpoints.glob("chain-*.pkl.json"))) < 2 and process.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the step ended before the kill: make it longer"
    assert not (killed / "sample" / "posterior.nc").exists()
    done = subprocess.run(
        [*CLI, "run", str(path), "-o", str(killed), "-q"], capture_output=True, text=True, env=often
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resumed from checkpoints" in done.stdout
    # never killed, run here rather than in a third interpreter, and checkpointed at the default interval:
    # the draws depend on neither
    run_workflow(path, output=whole, progress=False)
    ours = az.from_netcdf(str(killed / "sample" / "posterior.nc")).posterior["theta"].values
    theirs = az.from_netcdf(str(whole / "sample" / "posterior.nc")).posterior["theta"].values
    assert ours.shape == (2, 20000, 2) and np.array_equal(ours, theirs)


def test_ctrl_c_while_importing_prints_one_line_and_exits_130():
    # A real SIGINT, raised while the command line imports NumPy (its first seconds)
    script = (
        "import builtins, os, signal, sys\n"
        "real = builtins.__import__\n"
        "def hook(name, *args, **kwargs):\n"
        "    if name == 'numpy':\n"
        "        builtins.__import__ = real\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = hook\n"
        "from stanaccel.cli import main\n"
        "sys.exit(main(['sample', 'mvn_mean', '--method', 'mh']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    assert (done.returncode, done.stderr) == (130, "stanaccel: interrupted\n"), done.stderr


def test_a_step_stopped_before_saving_says_it_kept_no_draws(tmp_path):
    from stanaccel.workflow.runner import _stop_message

    (tmp_path / "sample" / "checkpoints").mkdir(parents=True)  # what a run on processes:2 leaves
    (tmp_path / "sample" / ".key").write_text("k\n")
    message = _stop_message({"name": "sample"}, tmp_path)
    assert "kept no draws" in message and "partial outputs" not in message
    warmup = tmp_path / "sample" / "checkpoints" / "warmup"
    warmup.mkdir()
    for name in ("nuts-chain-0-warmup.pkl", "nuts-chain-0-warmup.pkl.json"):
        (warmup / name).write_bytes(b"adaptation")
    message = _stop_message({"name": "sample"}, tmp_path, "the chains ran on ProcessExecutor(workers=2)")
    assert message.startswith(
        "step 'sample' stopped by Ctrl-C (the chains ran on ProcessExecutor(workers=2)): "
    )
    assert f"it kept no draws, only its warm-up's checkpoint in {warmup} " in message
    assert "partial outputs" not in message
    (tmp_path / "sample" / "checkpoints" / "chain-0.pkl").write_bytes(b"draws")
    assert f"its partial outputs are in {tmp_path / 'sample'}" in _stop_message({"name": "sample"}, tmp_path)


PROCESSES_WORKFLOW = KILLED_WORKFLOW.replace("draws = 20000", "draws = 2000000")
WORKERS_STARTED = 6.0
"""Seconds from "chains on" to the stop: two spawned workers have imported stanaccel and begun their chains
(a chain stopped before it began is left out, and these tests want both)."""


@pytest.mark.parametrize(("command", "signum"), [("sample", signal.SIGINT), ("run", signal.SIGTERM)])
@pytest.mark.slow
def test_a_stop_on_process_workers_is_quiet_and_says_what_was_kept(
    tmp_path, mvn_program, mvn_data_file, command, signum
):
    """A terminal's Ctrl-C (``timeout``'s SIGTERM) reaches the workers too: they stay quiet, the parent
    asks their chains to end (its stop file), keeps their draws and says so once."""
    out = tmp_path / ("fit.nc" if command == "sample" else "out")
    if command == "sample":
        args = ["sample", "mvn_mean", "--data", str(mvn_data_file), "--method", "mh", "--chains", "2",
                "--warmup", "100", "--draws", "2000000"]  # fmt: skip
    else:
        (tmp_path / "w.toml").write_text(PROCESSES_WORKFLOW)
        args = ["run", str(tmp_path / "w.toml")]
    code, output = _interrupt(
        [*CLI, *args, "--executor", "processes:2", "-q", "-o", str(out)],
        "chains on",
        delay=WORKERS_STARTED,
        group=True,
        signum=signum,
    )
    assert code == 128 + signum, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    [stop] = [line for line in output.splitlines() if line.startswith("interrupted")]
    posterior = out if command == "sample" else out / "sample" / "posterior.nc"
    draws = az.from_netcdf(str(posterior)).posterior.sizes
    assert draws["chain"] == 2 and draws["draw"] > 0, output
    if command == "sample":
        dropped = (
            r"( \(the faster chains' \d+ draws beyond the slowest chain's were dropped to keep them equal\))?"
        )
        assert re.fullmatch(
            f"interrupted: wrote {re.escape(str(out))} with {draws['draw']} draws per chain{dropped}", stop
        )
    else:
        assert stop.startswith("interrupted: step 'sample' stopped by SIGTERM: its partial outputs are in ")


@pytest.mark.slow
def test_an_interrupted_sample_file_is_a_warmup_source(tmp_path, mvn_program, mvn_data_file, capsys):
    out = tmp_path / "fit.nc"
    command = [*CLI, "sample", "mvn_mean", "--data", str(mvn_data_file), "--method", "mh", "--chains", "2",
               "--warmup", "100", "--draws", "2000000", "-q", "-o", str(out)]  # fmt: skip
    code, output = _interrupt(command, "draws", delay=1.0)
    assert code == 130 and out.is_file(), output
    state = WarmupState.from_netcdf(out)  # the warm-up's adaptation and each chain's last draw
    last = az.from_netcdf(str(out)).unconstrained_posterior["theta_unc"].values[:, -1, :]
    np.testing.assert_array_equal(state.positions, last)
    assert state.step_size.shape == (2,) and np.all(state.step_size > 0) and state.metric == "diag"
    assert state.seconds > 0 and state.warmup == "nuts"  # this version's file records its warm-up's time
    for again in (["sample", "--method", "hmc"], ["nuts"]):
        argv = [again[0], "mvn_mean", "--data", str(mvn_data_file), *again[1:], "--warmup-from", str(out)]
        assert main([*argv, "--draws", "50", "-q", "-o", str(tmp_path / "again.nc")]) == 0, (
            capsys.readouterr().err
        )
        said = "".join(capsys.readouterr())
        assert "records no time" not in said
        assert "warmup (borrowed)" in said or f"the warm-up from {out} took" in said


@pytest.mark.slow
def test_a_sample_file_of_a_laplace_warmup_is_a_warmup_source(tmp_path, mvn_program, mvn_data_file, capsys):
    """``mh``'s default warm-up (Laplace) adapts no step size: its file keeps the metric and the points."""
    out = tmp_path / "mh.nc"
    args = ["mvn_mean", "--data", str(mvn_data_file), "--chains", "2", "--draws", "100", "-q"]
    assert main(["sample", *args, "--method", "mh", "-o", str(out)]) == 0
    assert "Laplace" in capsys.readouterr().err
    state = WarmupState.from_netcdf(out)
    assert state.warmup == "laplace" and not state.has_step_size and state.seconds > 0
    last = az.from_netcdf(str(out)).unconstrained_posterior["theta_unc"].values[:, -1, :]
    np.testing.assert_array_equal(state.positions, last)
    assert state.inv_metric.shape == (2, 2) and np.all(state.inv_metric > 0)
    for method in ("mh", "hmc", "nuts"):
        code = main(
            ["sample", *args, "--method", method, "--warmup-from", str(out), "-o", str(tmp_path / "a.nc")]
        )
        err = capsys.readouterr().err
        assert code == 0, err
        assert "older stanaccel" not in err and "records no time" not in err
        assert ("adapting only it" in err) == (method != "mh")  # a step size where the method moves with one
        charged = json.loads(az.from_netcdf(str(tmp_path / "a.nc")).posterior.attrs["charged_seconds"])
        assert charged["warmup (borrowed)"] == pytest.approx(state.seconds)
    assert main(["nuts", *args[:3], "--draws", "50", "-q", "--warmup-from", str(out)]) == 2
    assert "with no step size" in capsys.readouterr().err


def test_a_file_without_adaptation_says_why(tmp_path):
    draws = {"posterior": {"x": np.zeros((2, 5))}}
    old = save_netcdf(to_inference_data(draws), tmp_path / "old.nc")
    with pytest.raises(ValueError, match="a sample file of an older stanaccel has none"):
        WarmupState.from_netcdf(old)
    ours = save_netcdf(
        to_inference_data({**draws, "attrs": {"stanaccel_version": "0.1.0", "sampler": "h-pCN"}}),
        tmp_path / "ours.nc",
    )
    with pytest.raises(ValueError, match=r"its run \(h-pCN on its program\) made none") as refused:
        WarmupState.from_netcdf(ours)
    assert "older" not in str(refused.value)


def _running_with(text: str) -> list[int]:
    """The live processes whose command line holds ``text`` (a zombie's is empty)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="lists processes through /proc")
@pytest.mark.slow
def test_a_compile_stopped_by_sigterm_leaves_no_compiler_running_and_no_cache_entry(tmp_path):
    """kill <pid> (SIGTERM to stanaccel alone) during a compile: g++'s cc1plus ends with it."""
    from stanaccel.stan.cache import cache_dir

    name = f"stopped_{os.getpid()}_{time.time_ns()}"  # a program never built: its compile runs
    program = tmp_path / f"{name}.stan"
    program.write_text(program_path("mvn_mean").read_text())
    process = subprocess.Popen(
        [*CLI, "compile", str(program)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 180
    while not _running_with(f"{name}_model"):  # the C++ compiler runs
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()[0]
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    left = _running_with(f"{name}_model")
    for pid in left:  # without the fix: a compiler compiling on for a minute, ended here
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 143 and "stopped by SIGTERM" in output, output
    assert left == [], "the compiler ran on after stanaccel stopped"
    assert not [p.name for p in (cache_dir() / "models").glob(f"*{name}*") if not p.name.endswith(".lock")]
