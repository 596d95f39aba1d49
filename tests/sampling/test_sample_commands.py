"""``stanaccel sample`` and the workflow ``sample`` step on a program of the user's own."""

import json

import arviz as az
import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.stan import write_data
from stanaccel.workflow import run_workflow
from tests.sampling.programs import REGRESSION, regression_data


def test_cli_sample_with_config_file_and_set(tmp_path, capsys):
    (tmp_path / "regression.stan").write_text(REGRESSION)
    write_data(tmp_path / "data.json", regression_data())
    (tmp_path / "tt.toml").write_text(
        'method = "tt"\ninner = "hmc"\nlevels = 3\nn_steps = 7\nschedule_rounds = 4\n'
    )
    out = tmp_path / "fit.nc"
    code = main(
        [
            "sample",
            str(tmp_path / "regression.stan"),
            "--data",
            str(tmp_path / "data.json"),
            "--config",
            str(tmp_path / "tt.toml"),
            "--set",
            "inner=mh",
            "--warmup",
            "200",
            "--draws",
            "300",
            "--seed",
            "3",
            "-q",
            "-o",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "coef[1]" in captured.out and "TT (MH) (exact sampler;" in captured.out
    attrs = az.from_netcdf(out).posterior.attrs
    settings, sources = json.loads(attrs["settings"]), json.loads(attrs["setting_sources"])
    assert settings["inner"] == "mh" and settings["levels"] == 3 and settings["draws"] == 300  # --set wins
    assert sources["scale"] == "tuned" and sources["levels"] == "user" and attrs["exact"] == 1
    metrics = json.loads((tmp_path / "fit.metrics.json").read_text())
    for key in (
        "ess_bulk_min",
        "ess_tail_min",
        "rhat_max",
        "wall_seconds",
        "evaluations",
        "ess_per_second",
        "ess_per_second_sampling",
    ):
        assert key in metrics
    assert metrics["charged_seconds"]["warmup"] > 0


@pytest.mark.slow
def test_workflow_sample_step_continues_a_nuts_step(tmp_path):
    (tmp_path / "regression.stan").write_text(REGRESSION)
    write_data(tmp_path / "data.json", regression_data())
    write_data(tmp_path / "half.json", regression_data(n=20))
    (tmp_path / "w.toml").write_text(
        """
[workflow]
name = "user"
seed = 5
output = "out"

[[steps]]
name = "nuts"
action = "nuts"
program = "regression.stan"
data = "data.json"
chains = 2
warmup = 200
draws = 200

[[steps]]
name = "hmc"
action = "sample"
program = "regression.stan"
data = "data.json"
method = "hmc"
warmup_from = "nuts"
draws = 300

[[steps]]
name = "stt"
action = "sample"
program = "regression.stan"
data = "data.json"
method = "stt"
chains = 2
warmup = 200
draws = 200
schedule_rounds = 4
observations = { count = "N", fields = ["x", "y"] }

[[steps]]
name = "dc"
action = "sample"
program = "regression.stan"
data = "data.json"
method = "dc"
chains = 2
warmup = 200
draws = 200
approx = { program = "regression.stan", data = "half.json" }   # found beside the workflow file
"""
    )
    context = run_workflow(tmp_path / "w.toml", output=tmp_path / "out", progress=False)
    hmc = context.results["hmc"]
    assert hmc["result"].config.chains == 2 and "warmup" not in hmc["result"].charged_seconds
    for step in ("hmc", "stt", "dc"):
        folder = context.output / step
        assert {"posterior.nc", "metrics.json", "summary.txt"} <= {p.name for p in folder.iterdir()}
        assert json.loads((folder / "metrics.json").read_text())["method"] == step


@pytest.mark.slow
def test_workflow_sample_step_continues_a_cmdstan_run(tmp_path, mvn_model):
    from stanaccel.sampling.warmup import READAPTED
    from stanaccel.stan.nuts import BorrowedWarmupWarning, sample_nuts
    from tests.stan.test_cmdstan import write_cmdstan_csv

    fit = sample_nuts(mvn_model, chains=2, warmup=150, draws=20, seed=3, progress=False)
    csvs = [write_cmdstan_csv(tmp_path / f"run-{c + 1}.csv", fit, c, "mvn_mean_model") for c in range(2)]
    write_data(tmp_path / "data.json", json.loads(mvn_model.data_json))
    (tmp_path / "w.toml").write_text(
        '[workflow]\nname = "cmdstan"\n[[steps]]\nname = "tt"\naction = "sample"\nprogram = "mvn_mean"\n'
        f'data = "data.json"\nmethod = "tt"\ndraws = 100\nschedule_rounds = 4\n'
        f"warmup_from = {json.dumps([c.name for c in csvs])}\n"
    )
    with pytest.warns(BorrowedWarmupWarning, match="cannot be checked"):  # CSV files record no data
        context = run_workflow(tmp_path / "w.toml", output=tmp_path / "out", progress=False)
    result = context.results["tt"]["result"]
    assert result.config.chains == 2 and READAPTED in result.charged_seconds
    assert "warmup" not in result.charged_seconds and "warmup (borrowed)" not in result.charged_seconds
    # tuned from the CmdStan run's warm-up adapted again from its points
    assert result.config.step_size == float(np.median(result.adaptation.step_size))
    assert result.adaptation.step_size.tolist() != fit.step_size.tolist()


@pytest.mark.parametrize(
    "command", [["sample", "--method", "hmc"], ["sample", "--method", "auto"], ["sample", "--method", "nuts"],
                ["nuts"]],
)  # fmt: skip
def test_a_program_without_parameters_is_refused_before_it_is_compiled(tmp_path, capsys, command):
    (tmp_path / "zero.stan").write_text("data { real y; }\ngenerated quantities { real z = y; }\n")
    write_data(tmp_path / "zero.json", {"y": 1.5})
    code = main([command[0], str(tmp_path / "zero.stan"), "--data", str(tmp_path / "zero.json"), *command[1:],
                 "-q", "-o", str(tmp_path / "fit.nc")])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err == (
        f"stanaccel {command[0]}: error: zero.stan has no parameters, so there is nothing to sample: "
        "stanaccel samples the parameters' posterior and does not offer Stan's fixed_param sampler; to run "
        "the generated quantities from the data alone, use CmdStan's (method=sample algorithm=fixed_param)\n"
    )
