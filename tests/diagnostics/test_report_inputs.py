"""``stanaccel report`` on output folders that are not whole: it says what it found and names the file.

The folders are made here, as a run leaves them (no sampling): a run that
has not finished its first step, a step whose files are junk, a ``run.json``
naming a folder outside the output folder.
"""

import json
import subprocess
import sys
from html import unescape

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.diagnostics._arviz import az

METRICS = {
    "method": "stan_nuts", "sampler": "Stan NUTS", "exact": True, "program": "mvn_mean", "chains": 2,
    "draws_per_chain": 100, "ess_bulk_min": 150.0, "ess_tail_min": 140.0, "rhat_max": 1.01,
    "wall_seconds": 1.0, "sampling_seconds": 1.0, "ess_per_second": 140.0, "converged": True, "warnings": [],
}  # fmt: skip


def _run_folder(folder, names=("hmc",)):
    """An output folder of a finished run with a sampler step per name (draws from a normal)."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(1)
    steps = []
    for name in names:
        step = folder / name
        step.mkdir()
        az.from_dict(posterior={"mu": rng.normal(size=(2, 100, 2))}).to_netcdf(str(step / "posterior.nc"))
        (step / "metrics.json").write_text(json.dumps(METRICS))
        steps.append(
            {"name": name, "action": "nuts", "status": "done", "cached": False, "seed": 1, "seconds": 1.0}
        )
    (folder / "workflow.toml").write_text("# the run's copy of its workflow file\n")
    run = {"workflow": "junk", "status": "done", "seed": 1, "versions": {}, "steps": steps}
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def test_a_run_that_has_not_finished_its_first_step_is_said_to_be_in_progress(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "nuts" / "checkpoints").mkdir(parents=True)  # what `stanaccel run` has written by then
    (out / "workflow.toml").write_text("# the run's copy of its workflow file\n")
    (out / "nuts" / ".key").write_text("k\n")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} holds no run.json yet: the workflow run there has not finished its first step" in err
    assert "it is still running, or it was stopped before that step was done" in err
    assert "report again then, or, if the run was stopped, run the workflow again" in err


@pytest.mark.parametrize(
    "damage, why",
    [
        (
            lambda step: (step / "metrics.json").write_text("{not json"),
            "metrics.json is not valid JSON (Expecting",
        ),
        (lambda step: (step / "metrics.json").write_text("[1, 2]"), "metrics.json is not a table of metrics"),
        (
            lambda step: (step / "posterior.nc").write_bytes(b"junk"),
            "posterior.nc is not a readable netCDF file",
        ),
        (
            lambda step: (step / "posterior.nc").write_bytes((step / "posterior.nc").read_bytes()[:5000]),
            "posterior.nc is not a readable netCDF file (OSError",
        ),
        (lambda step: (step / "statistics.json").write_text("]"), "statistics.json is not valid JSON"),
    ],
    ids=["junk-metrics", "metrics-not-a-table", "junk-netcdf", "cut-short-netcdf", "junk-statistics"],
)
def test_a_step_whose_file_is_junk_is_left_out_and_the_file_named(tmp_path, capsys, damage, why):
    out = _run_folder(tmp_path / "out")
    damage(out / "hmc")
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"step 'hmc' is left out: {out / 'hmc' / why.split()[0]}" in err
    assert why.split(" ", 1)[1] in err
    assert "delete it and run the workflow again to write it" in err
    html = (out / "report.html").read_text()
    assert "Unreadable output: step &#39;hmc&#39; is left out" in html and 'id="step-hmc"' not in html


def test_a_study_table_that_is_junk_is_named(tmp_path, capsys):
    out = _run_folder(tmp_path / "out", names=())
    study = out / "study"
    study.mkdir()
    (study / "table.md").write_text("| method | ess |\n|---|---|\n")
    (study / "table.json").write_text('[{"method": "pt", ')
    run = json.loads((out / "run.json").read_text())
    run["steps"].append(
        {
            "name": "study",
            "action": "tempering_study",
            "status": "done",
            "cached": False,
            "seed": 1,
            "seconds": 1.0,
        }
    )
    (out / "run.json").write_text(json.dumps(run))
    assert main(["report", str(out)]) == 1
    assert f"step 'study' is left out: {study / 'table.json'} is not valid JSON" in capsys.readouterr().err


def test_a_run_json_naming_a_folder_outside_the_output_folder_is_refused(tmp_path, capsys):
    out = _run_folder(tmp_path / "out")
    run = json.loads((out / "run.json").read_text())
    run["steps"][0]["name"] = "../elsewhere"
    (out / "run.json").write_text(json.dumps(run))
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'run.json'} is not the record of a stanaccel run: step name '../elsewhere'" in err


def test_an_interrupted_run_and_step_entries_missing_keys_are_reported(tmp_path, capsys):
    """A stopped step's entry has no "cached" (the template's StrictUndefined raised); one cut short has only
    its name."""
    out = _run_folder(tmp_path / "out", names=())
    run = json.loads((out / "run.json").read_text())
    run["steps"] = [
        {"name": "data", "action": "generate", "status": "done", "cached": False, "seed": 1, "seconds": 0.1},
        {"name": "hmc", "action": "sample", "status": "interrupted", "seed": 2, "seconds": 3.0},
    ]
    run["steps"][1]["status"] = "interrupted"
    run["steps"].append({"name": "cut"})
    run.update(status="interrupted", interrupted_step="hmc")
    (out / "run.json").write_text(json.dumps(run))
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert err == (
        "stanaccel report: warning: the run was interrupted during step 'hmc': run the workflow again to "
        "continue it (its later steps did not run)\n"
    )
    html = (out / "report.html").read_text()
    assert "<td>cut</td><td></td><td>not recorded</td>" in html and "The run was interrupted" in html


def test_metrics_of_the_wrong_kind_leave_the_step_out_naming_the_file(tmp_path, capsys):
    out = _run_folder(tmp_path / "out", names=("nuts", "hmc"))
    (out / "hmc" / "metrics.json").write_text(json.dumps({**METRICS, "ess_bulk_min": "many"}))
    (out / "nuts" / "metrics.json").write_text(json.dumps({**METRICS, "charged_seconds": [1, 2]}))
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"step 'hmc' is left out: {out / 'hmc' / 'metrics.json'} holds ess_bulk_min = 'many', which" in err
    assert f"step 'nuts' is left out: the files in {out / 'nuts'} hold values stanaccel did not write" in err
    assert "Traceback" not in err


def test_the_report_shows_the_proposals_the_program_rejected():
    from stanaccel.diagnostics.metrics import REJECTED_LABEL
    from stanaccel.diagnostics.report import _metric_rows

    rows = _metric_rows({**METRICS, "rejected_by_program": 37}, None, 1.0, 1.0, 140.0)
    assert (REJECTED_LABEL, 37) in rows  # as the console and metrics.json give it
    assert not [label for label, _ in _metric_rows(METRICS, None, 1.0, 1.0, 140.0) if "rejected" in label]


@pytest.mark.parametrize(
    "target, said",
    [
        (
            "hmc/posterior.nc",
            "hmc/posterior.nc: the report is an HTML page: give a file name ending in .html",
        ),
        ("run.json", "run.json: the report is an HTML page"),
        (".", "is a folder: give the report's file name, such as "),
        ("mine.html", "mine.html exists and is not a report page that stanaccel wrote"),
    ],
    ids=["posterior", "run.json", "folder", "users-page"],
)
def test_a_report_file_that_is_not_a_page_or_is_the_runs_own_is_refused(tmp_path, capsys, target, said):
    out = _run_folder(tmp_path / "out", names=("hmc",) if "/" in target else ())
    (out / "mine.html").write_text("<p>my page</p>\n")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(["report", str(out), "-o", str(out / target)]) == 2
    assert said in capsys.readouterr().err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    if target == "mine.html":
        assert main(["report", str(out), "-o", str(out / "page.html")]) == 0
        assert main(["report", str(out), "-o", str(out / "page.html")]) == 0  # its own page: written again


def test_a_running_run_is_said_to_be_in_progress_and_a_killed_one_killed(tmp_path, capsys):
    out = _run_folder(tmp_path / "out", names=())
    run = json.loads((out / "run.json").read_text())
    run.update(status="running", running_step="pt")
    (out / "run.json").write_text(json.dumps(run))
    lock = out / ".stanaccel-run.lock"
    holder = subprocess.Popen(  # a run holding its lock, as `stanaccel run` does
        [sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        assert main(["report", str(out)]) == 0
    finally:
        holder.kill()
        holder.wait()
    said = f"run in progress (pid {holder.pid}, step 'pt'): the page covers the steps done so far"
    assert f"stanaccel report: note: {said}" in capsys.readouterr().err
    html = unescape((out / "report.html").read_text())
    assert f"R{said[1:]}" in html and "<td>pt</td><td></td><td>running</td>" in html
    assert "written by a step of the run" not in html

    assert main(["report", str(out)]) == 1  # killed: its lock file is left, and no longer locked
    said = (
        f"the run (pid {holder.pid}) is no longer running: it was killed during step 'pt'; run the workflow"
    )
    assert said in capsys.readouterr().err
    assert "<td>pt</td><td></td><td>killed while running</td>" in (out / "report.html").read_text()


HOLD_LOCK = """
import fcntl, os, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.write(f"{os.getpid()}\\n")
handle.flush()
print("locked", flush=True)
time.sleep(60)
"""


def test_a_file_given_as_the_output_folder_is_named(tmp_path, capsys):
    path = tmp_path / "base.toml"
    path.write_text('[workflow]\nname = "base"\noutput = "out_base"\n')
    assert main(["report", str(path)]) == 2
    assert (
        f"{path} is a file, not an output folder: give the output folder of `stanaccel run` (the workflow "
        f"{path} writes its run in out_base)" in capsys.readouterr().err
    )
