"""The command line and workflow files, end to end with real Stan runs."""

import json
import re

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.datasets import generate
from stanaccel.diagnostics._arviz import az
from stanaccel.stan import write_data
from stanaccel.workflow import load_workflow, run_workflow

QUICK_WORKFLOW = """
[workflow]
name = "tiny"
seed = 5

[[steps]]
name = "data"
action = "generate"
generator = "gp_ard"
N = 20
D = 2

[[steps]]
name = "nuts"
action = "nuts"
program = "gp_ard"
data = "data"
chains = 2
warmup = 150
draws = 100
"""


def test_cli_nuts_writes_inference_data_and_prints_summary(tmp_path, capsys, mvn_program):
    data = write_data(tmp_path / "data.json", generate("mvn_mean", N=10, D=2, seed=1).data)
    out = tmp_path / "fit.nc"
    code = main(
        [
            "nuts",
            "mvn_mean",
            "--data",
            str(data),
            "--chains",
            "2",
            "--warmup",
            "200",
            "--draws",
            "100",
            "--seed",
            "3",
            "--output",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "theta[1]" in printed and "r_hat" in printed and "ESS bulk min" in printed
    assert az.from_netcdf(str(out)).posterior["theta"].shape == (2, 100, 2)
    # Its warm-up, borrowed by a second run, is charged to that run (like with like).
    again = ["nuts", "mvn_mean", "--data", str(data), "--warmup-from", str(out), "--draws", "50", "--quiet"]
    assert main([*again, "--output", str(tmp_path / "again.nc")]) == 0
    assert re.search(
        r"the warm-up from .*fit.nc took \d+\.\d+ s: charged to this run", capsys.readouterr().out
    )


def test_cli_reports_compile_errors_without_a_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.stan"
    bad.write_text("parameters {\n  real y\n}\n")
    assert main(["compile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "error" in err and "line 3" in err and "Traceback" not in err


def test_cli_reports_bad_data(tmp_path, capsys, mvn_program):
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"D": 2}))
    assert main(["nuts", "mvn_mean", "--data", str(data), "--quiet"]) == 2
    assert re.search(
        r"data variable N \(declared in 'mvn_mean.stan', line 11.*\) is missing", capsys.readouterr().err
    )


def test_cli_calls_a_folder_a_folder_and_an_empty_program_empty(tmp_path, capsys):
    for command in ("nuts", "sample"):
        assert main([command, str(tmp_path), "-o", str(tmp_path / "x.nc")]) == 2
        assert (
            f"Stan program {str(tmp_path)!r} is a folder: give a Stan program file (.stan)"
            in capsys.readouterr().err
        )
        assert main([command, "mvn_mean", "--data", str(tmp_path), "-o", str(tmp_path / "x.nc")]) == 2
        assert f"Stan data file {tmp_path} is a folder: give the JSON data file" in capsys.readouterr().err
    (tmp_path / "empty.stan").write_text("\n")
    assert main(["sample", str(tmp_path / "empty.stan"), "-o", str(tmp_path / "x.nc")]) == 2
    assert (
        "empty.stan is empty: a Stan program declares its data, parameters and model"
        in capsys.readouterr().err
    )


def test_workflow_run_is_reproducible_and_writes_its_outputs(tmp_path, gp_program):
    path = tmp_path / "tiny.toml"
    path.write_text(QUICK_WORKFLOW)
    first = run_workflow(path, output=tmp_path / "a", progress=False)
    second = run_workflow(path, output=tmp_path / "b", progress=False)
    for name in (
        "workflow.toml",
        "run.json",
        "data/data.json",
        "nuts/posterior.nc",
        "nuts/metrics.json",
        "nuts/summary.txt",
    ):
        assert (tmp_path / "a" / name).is_file(), name
    metrics = json.loads((tmp_path / "a" / "nuts" / "metrics.json").read_text())
    for key in ("ess_bulk_min", "ess_tail_min", "rhat_max", "wall_seconds", "gradient_evaluations"):
        assert key in metrics
    np.testing.assert_array_equal(first.results["nuts"]["fit"].draws(), second.results["nuts"]["fit"].draws())


def test_quickstart_workflow_parses():
    workflow = load_workflow("workflows/quickstart.toml")
    assert [s["action"] for s in workflow.steps] == ["generate", "nuts", "sample", "report"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("[workflow]\nname='x'\n", "no \\[\\[steps\\]\\]"),
        ("[[steps]]\nname='a'\naction='fly'\n", "unknown action 'fly'"),
        ("[[steps]]\nname='a'\naction='generate'\n[[steps]]\nname='a'\naction='generate'\n", "two steps"),
        ("[[steps\n", "not valid TOML"),
    ],
)
def test_bad_workflow_files_are_refused(tmp_path, text, message):
    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_workflow(path)


def test_step_referring_to_a_missing_step_is_named(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text("[[steps]]\nname='nuts'\naction='nuts'\nprogram='gp_ard'\ndata='nothing'\n")
    with pytest.raises(ValueError, match="data = 'nothing' names no earlier step"):
        run_workflow(path, output=tmp_path / "out", progress=False)


GENERATE_ONLY = """
[workflow]
name = "data-only"
seed = 5

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2
"""


def test_run_seed_overrides_the_files_seed(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(GENERATE_ONLY)
    assert main(["run", str(path), "-o", str(tmp_path / "file"), "-q"]) == 0
    assert main(["run", str(path), "-o", str(tmp_path / "seven"), "--seed", "7", "-q"]) == 0
    again = run_workflow(path, output=tmp_path / "again", seed=7, progress=False)
    records = {name: json.loads((tmp_path / name / "run.json").read_text()) for name in ("file", "seven")}
    assert records["file"]["seed"] == 5 and records["seven"]["seed"] == 7
    assert records["seven"]["steps"][0]["seed"] == again.step_seed(again.workflow.steps[0])
    assert records["seven"]["steps"][0]["seed"] != records["file"]["steps"][0]["seed"]
    seven, again_data = ((tmp_path / name / "data" / "data.json").read_text() for name in ("seven", "again"))
    assert seven == again_data


def test_stanaccel_warnings_print_as_one_plain_line(capsys):
    from stanaccel.cli import _show_warning
    from stanaccel.kernels.driver import CheckpointWarning

    _show_warning(CheckpointWarning("chain 1: not resuming"), CheckpointWarning, "/x/driver.py", 315)
    assert capsys.readouterr().err == "stanaccel: CheckpointWarning: chain 1: not resuming\n"
    _show_warning(UserWarning("elsewhere"), UserWarning, "/x/other.py", 7)
    assert "/x/other.py:7: UserWarning: elsewhere" in capsys.readouterr().err  # other packages' keep Python's
