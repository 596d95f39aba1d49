"""Nothing a workflow or a resumed run prints is wrong because of a cache, a checkpoint or a second run."""

import json
import os
import shutil

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.diagnostics._arviz import az
from stanaccel.stan import write_data
from stanaccel.workflow import run_workflow
from stanaccel.workflow.cache import MARKER, RESULT, StepCacheDamaged
from stanaccel.workflow.runner import output_lock

WORKFLOW = """
[workflow]
name = "integrity"
seed = 7

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
warmup = 150
draws = 100

[[steps]]
name = "hmc"
action = "sample"
program = "mvn_mean"
data = "data"
method = "hmc"
warmup_from = "nuts"
chains = 2
draws = 400
"""


def _cached(output) -> dict[str, bool]:
    return {s["name"]: s["cached"] for s in json.loads((output / "run.json").read_text())["steps"]}


@pytest.fixture(scope="module")
def done(tmp_path_factory, mvn_program):
    """A completed run: its workflow file and output folder (tests work on copies of the folder)."""
    folder = tmp_path_factory.mktemp("integrity")
    path = folder / "w.toml"
    path.write_text(WORKFLOW)
    run_workflow(path, output=folder / "out", progress=False)
    return path, folder / "out"


@pytest.fixture
def copy(done, tmp_path):
    path, out = done
    shutil.copytree(out, tmp_path / "out")
    return path, tmp_path / "out"


def _sampled(context):
    return context.results["hmc"]["result"].run


def test_recompute_starts_from_nothing_not_from_the_checkpoints(copy):
    path, out = copy
    context = run_workflow(path, output=out, progress=False, cache=False)
    assert not any(_cached(out).values())
    assert _sampled(context).resumed_draws.tolist() == [0, 0]  # was [400, 400]: every draw reloaded


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda folder: (folder / RESULT).write_bytes((folder / RESULT).read_bytes()[:100]), RESULT),
        (lambda folder: (folder / MARKER).write_text("junk"), MARKER),
        (lambda folder: (folder / "posterior.nc").unlink(), "posterior.nc is missing"),
    ],
    ids=["truncated-result", "junk-marker", "deleted-posterior"],
)
def test_a_damaged_step_cache_is_said_and_the_step_resumed_is_charged_its_draws_time(copy, damage, named):
    path, out = copy
    damage(out / "hmc")
    with pytest.warns(StepCacheDamaged, match=f"step 'hmc'.*{named}"):
        context = run_workflow(path, output=out, progress=False)
    assert _cached(out) == {"data": True, "nuts": True, "hmc": False}
    run = _sampled(context)
    assert run.resumed_draws.tolist() == [400, 400]  # the checkpoints are whole: resumed, ...
    assert run.wall_seconds >= run.chain_seconds.max()  # ... and charged the seconds their draws took
    metrics = json.loads((out / "hmc" / "metrics.json").read_text())
    assert metrics["wall_seconds"] >= run.chain_seconds.max()
    assert (out / "hmc" / "posterior.nc").is_file()


def test_a_borrowed_warmup_is_charged_its_recorded_seconds(done):
    _, out = done
    nuts = az.from_netcdf(str(out / "nuts" / "posterior.nc")).posterior.attrs
    charged = json.loads((out / "hmc" / "metrics.json").read_text())["charged_seconds"]
    assert nuts["warmup_seconds"] > 0
    assert charged == {"warmup (borrowed)": pytest.approx(nuts["warmup_seconds"])}


def test_a_warmup_from_cmdstan_files_is_said_to_be_not_charged(tmp_path, mvn_model, capsys):
    from stanaccel.sampling.warmup import READAPTED
    from stanaccel.stan.nuts import BorrowedWarmupWarning, sample_nuts
    from tests.stan.test_cmdstan import write_cmdstan_csv

    fit = sample_nuts(mvn_model, chains=2, warmup=150, draws=20, seed=3, progress=False)
    csvs = [write_cmdstan_csv(tmp_path / f"run-{c + 1}.csv", fit, c, "mvn_mean_model") for c in range(2)]
    write_data(tmp_path / "data.json", json.loads(mvn_model.data_json))
    (tmp_path / "w.toml").write_text(
        '[workflow]\nname = "cmdstan"\n[[steps]]\nname = "hmc"\naction = "sample"\nprogram = "mvn_mean"\n'
        f'data = "data.json"\nmethod = "hmc"\ndraws = 50\n'
        f"warmup_from = {json.dumps([c.name for c in csvs])}\n"
    )
    with pytest.warns(BorrowedWarmupWarning, match="cannot be checked"):  # CSV files record no data
        context = run_workflow(tmp_path / "w.toml", output=tmp_path / "out", progress=False)
    assert list(context.results["hmc"]["result"].charged_seconds) == [READAPTED]  # the borrowed one: no time
    assert "records no time" in capsys.readouterr().out


def test_a_second_run_on_the_same_output_folder_is_refused(copy, capsys):
    path, out = copy
    with output_lock(out):
        assert main(["run", str(path), "-o", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert f"output folder {out} is in use by another stanaccel run (pid {os.getpid()})" in err
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0  # the lock is gone with its run


def test_a_later_steps_program_that_does_not_compile_stops_the_run_before_any_step(tmp_path, capsys):
    (tmp_path / "broken.stan").write_text("parameters { real mu; }\nmodel { mu ~ normal(0, 1) }\n")
    text = WORKFLOW + '\n[[steps]]\nname = "late"\naction = "nuts"\nprogram = "broken.stan"\ndata = "data"\n'
    (tmp_path / "w.toml").write_text(text)
    assert main(["run", str(tmp_path / "w.toml"), "-o", str(tmp_path / "out"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "step 'late': program = 'broken.stan' does not compile" in err and "Syntax error" in err
    assert not (tmp_path / "out" / "data").exists()  # no step ran


def test_report_says_which_steps_it_leaves_out_and_names_a_junk_run_json(copy, capsys):
    _, out = copy
    (out / "hmc" / "posterior.nc").unlink()
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert "step 'hmc' is left out" in err and str(out / "hmc" / "posterior.nc") in err
    assert "Missing output: step &#39;hmc&#39; is left out" in (out / "report.html").read_text()
    (out / "run.json").write_text("{junk")
    assert main(["report", str(out)]) == 2
    assert f"{out / 'run.json'} is not valid JSON" in capsys.readouterr().err


def test_draws_stay_those_of_an_uninterrupted_run(done, copy):
    """Recomputing or resuming changes the time charged, never the draws."""
    path, out = copy
    (out / "hmc" / RESULT).unlink()
    with pytest.warns(StepCacheDamaged):
        run_workflow(path, output=out, progress=False)
    original = az.from_netcdf(str(done[1] / "hmc" / "posterior.nc")).posterior["theta"].values
    again = az.from_netcdf(str(out / "hmc" / "posterior.nc")).posterior["theta"].values
    np.testing.assert_array_equal(again, original)
