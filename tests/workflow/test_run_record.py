"""``run.json`` says what a run did, from before its first step: running (and which step), done, failed
(with the error), interrupted; a step resumed from its checkpoints records the draws it took from them."""

import json
import os
import subprocess
import sys

import pytest

from stanaccel.cli import main
from stanaccel.workflow import run_workflow

DATA = """
[workflow]
name = "record"
seed = 3

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2
"""


def _record(out):
    return json.loads((out / "run.json").read_text())


def test_a_step_that_fails_is_recorded_failed_with_its_error(tmp_path, capsys):
    path, out = tmp_path / "w.toml", tmp_path / "out"
    path.write_text(DATA + DATA.split("\n\n", 1)[1].replace('"data"', '"more"').replace("N = 10", "N = -5"))
    assert main(["run", str(path), "-o", str(out), "-q"]) == 2
    assert "negative dimensions are not allowed" in capsys.readouterr().err
    record = _record(out)
    assert record["status"] == "failed" and record["failed_step"] == "more" and "running_step" not in record
    assert [(s["name"], s["status"]) for s in record["steps"]] == [("data", "done"), ("more", "failed")]
    assert record["steps"][1]["error"] == "negative dimensions are not allowed"


def test_run_json_is_written_before_the_first_step(tmp_path):
    """A report as the first step reads it (it found no run.json); the page says the run is running."""
    path, out = tmp_path / "w.toml", tmp_path / "out"
    path.write_text(
        DATA.replace('name = "data"', 'name = "page"\naction = "report"\n[[steps]]\nname = "data"')
    )
    run_workflow(path, output=out, progress=False)
    assert (
        "workflow status <b>running</b>&nbsp;(written by a step of the run"
        in (out / "report.html").read_text()
    )
    record = _record(out)
    assert record["status"] == "done" and [s["name"] for s in record["steps"]] == ["page", "data"]


NUTS = """
[[steps]]
name = "nuts"
action = "nuts"
data = "data"
chains = 2
warmup = 50
draws = 100
"""


def test_a_step_resumed_from_its_checkpoints_records_the_draws_it_took(tmp_path, mvn_program, capsys):
    path, out = tmp_path / "w.toml", tmp_path / "out"
    path.write_text(DATA + NUTS)
    run_workflow(path, output=out, progress=False)
    assert not any("resumed_draws" in s for s in _record(out)["steps"])
    (out / "nuts" / "step.json").unlink()  # as a killed step leaves it: its checkpoints, no step.json
    run_workflow(path, output=out, progress=False)
    assert [s.get("resumed_draws") for s in _record(out)["steps"]] == [None, [100, 100]]
    assert "resumed from checkpoints: draws per chain taken from them [100, 100]" in capsys.readouterr().out


FULL_DISK = """
mount -t tmpfs -o size=1m tmpfs "$1"
head -c $(( $(df -k --output=avail "$1" | tail -n 1) * 1024 - 300 * 1024 )) /dev/zero > "$1/filler"
cd "$1" && shift && "$@" 2>&1
code=$?
cat out/run.json
exit $code
"""
"""Mount a 1 MB tmpfs at $1 (in a mount namespace of its own), fill it to 300 kB of room, run the rest of
the command line in it, then print ``out/run.json``."""


def _can_mount() -> bool:
    try:
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True
        )
    except OSError:
        return False
    return done.returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs unshare --user --mount (user namespaces) for a full disk")
@pytest.mark.slow
def test_a_full_disk_during_a_step_names_the_step_and_is_recorded(tmp_path):
    """It gave a bare "[Errno 28] No space left on device", and run.json stayed "running"."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "w.toml").write_text(
        DATA + DATA.split("\n\n", 1)[1].replace('"data"', '"big"').replace("N = 10", "N = 20000")
    )
    command = [sys.executable, "-m", "stanaccel.cli", "run", str(tmp_path / "w.toml"), "-o", "out", "-q"]
    namespace = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", FULL_DISK, "sh", str(disk)]
    done = subprocess.run([*namespace, *command], capture_output=True, text=True, env=dict(os.environ))
    said, record = done.stdout.split("\n{", 1)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "stanaccel run: error: step 'big': could not write " in said, said
    assert "(No space left on device); make room" in said and "Traceback" not in said
    record = json.loads("{" + record)
    assert record["status"] == "failed" and record["steps"][-1]["status"] == "failed"
