"""``stanaccel report`` on output folders that are not whole: it says what it found and names the file.

The folders are made here, as a run leaves them (no sampling): a run that
has not finished its first step, a step whose files are junk, a ``run.json``
naming a folder outside the output folder.
"""

import json

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
