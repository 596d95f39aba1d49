"""Cached workflow steps: an unchanged rerun computes nothing, a change reruns its step and dependants."""

import json

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.diagnostics._arviz import az
from stanaccel.stan import write_data
from stanaccel.workflow import run_workflow
from stanaccel.workflow.cache import MARKER

WORKFLOW = """
[workflow]
name = "cached"
seed = 5

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
draws = {nuts_draws}

[[steps]]
name = "hmc"
action = "sample"
program = "mvn_mean"
data = "data"
method = "hmc"
warmup_from = "nuts"
chains = 2
draws = {hmc_draws}

[[steps]]
name = "file"
action = "nuts"
program = "mvn_mean"
data = "extra.json"
chains = 1
warmup = 100
draws = 50
"""


def _write(folder, nuts_draws=50, hmc_draws=60, extra_n=8):
    from stanaccel.datasets import generate

    write_data(folder / "extra.json", generate("mvn_mean", N=extra_n, D=2, seed=2).data)
    path = folder / "w.toml"
    path.write_text(WORKFLOW.format(nuts_draws=nuts_draws, hmc_draws=hmc_draws))
    return path


def _cached(output) -> dict[str, bool]:
    return {s["name"]: s["cached"] for s in json.loads((output / "run.json").read_text())["steps"]}


def _draws(output, step):
    return az.from_netcdf(str(output / step / "posterior.nc")).posterior["theta"].values


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, mvn_program):
    folder = tmp_path_factory.mktemp("cache")
    path = _write(folder)
    run_workflow(path, output=folder / "out", progress=False)
    return folder, path


def test_an_unchanged_rerun_recomputes_nothing_and_gives_the_same_results(first_run):
    folder, path = first_run
    out = folder / "out"
    assert not any(_cached(out).values())
    before = {s: (out / s / "posterior.nc").stat().st_mtime_ns for s in ("nuts", "hmc")}
    context = run_workflow(path, output=out, progress=False)
    assert all(_cached(out).values())
    assert {s: (out / s / "posterior.nc").stat().st_mtime_ns for s in ("nuts", "hmc")} == before
    # Later steps read the loaded results exactly as the computed ones.
    assert context.results["hmc"]["result"].config.chains == 2
    assert context.results["nuts"]["fit"].warmup_state().step_size.shape == (2,)
    provenance = json.loads((out / "provenance.json").read_text())
    assert {"versions", "machine", "git", "steps"} <= set(provenance)
    hmc = provenance["steps"][2]
    assert hmc["settings_used"]["step_size"] > 0 and hmc["setting_sources"]["step_size"] == "tuned"
    assert [s["key"] for s in provenance["steps"]] == [
        s["key"] for s in json.loads((out / "run.json").read_text())["steps"]
    ]


def test_a_changed_setting_reruns_its_step_and_its_dependants_only(first_run):
    folder, _ = first_run
    out = folder / "out"
    run_workflow(_write(folder, hmc_draws=70), output=out, progress=False)
    assert _cached(out) == {"data": True, "nuts": True, "hmc": False, "file": True}
    assert _draws(out, "hmc").shape == (2, 70, 2)
    run_workflow(_write(folder, nuts_draws=40, hmc_draws=70), output=out, progress=False)
    assert _cached(out) == {"data": True, "nuts": False, "hmc": False, "file": True}
    run_workflow(_write(folder, nuts_draws=40, hmc_draws=70, extra_n=9), output=out, progress=False)
    assert _cached(out) == {"data": True, "nuts": True, "hmc": True, "file": False}


@pytest.mark.slow
def test_cached_and_uncached_runs_give_bit_identical_draws(first_run, tmp_path):
    folder, _ = first_run
    path = _write(folder, nuts_draws=40, hmc_draws=70, extra_n=9)
    run_workflow(path, output=tmp_path / "fresh", progress=False)
    for step in ("nuts", "hmc", "file"):
        np.testing.assert_array_equal(_draws(tmp_path / "fresh", step), _draws(folder / "out", step))


@pytest.mark.slow
def test_recompute_flag_and_cache_key_rerun_everything(first_run, tmp_path):
    folder, path = first_run
    out = tmp_path / "out"
    assert main(["run", str(path), "-o", str(out), "-q"]) == 0
    assert main(["run", str(path), "-o", str(out), "-q", "--recompute"]) == 0
    assert not any(_cached(out).values())
    text = path.read_text().replace("seed = 5\n", "seed = 5\ncache = false\n")
    (tmp_path / "nocache.toml").write_text(text)
    (tmp_path / "extra.json").write_text((folder / "extra.json").read_text())
    run_workflow(tmp_path / "nocache.toml", output=out, progress=False)
    assert not any(_cached(out).values())


def test_a_step_without_its_completion_marker_runs_again(first_run, tmp_path):
    folder, path = first_run
    out = tmp_path / "out"
    run_workflow(path, output=out, progress=False)
    (out / "hmc" / MARKER).unlink()  # as after a kill in the middle of the step
    run_workflow(path, output=out, progress=False)
    assert _cached(out) == {"data": True, "nuts": True, "hmc": False, "file": True}


def test_cache_must_be_true_or_false(tmp_path):
    (tmp_path / "w.toml").write_text(
        '[workflow]\ncache = "yes"\n[[steps]]\nname = "d"\naction = "generate"\n'
    )
    with pytest.raises(ValueError, match=r"\[workflow\] cache = 'yes': expected true or false"):
        run_workflow(tmp_path / "w.toml", output=tmp_path / "out", progress=False)


def test_a_programs_included_file_is_part_of_its_steps_key(tmp_path):
    # stanc alone (no build): a step whose program's #include file changed runs again.
    from stanaccel.workflow.cache import file_digest

    (tmp_path / "main.stan").write_text("parameters {\n  real mu;\n}\nmodel {\n  #include prior.stan\n}\n")
    (tmp_path / "prior.stan").write_text("mu ~ normal(0, 1);\n")
    before = file_digest(tmp_path / "main.stan")
    (tmp_path / "prior.stan").write_text("mu ~ normal(0, 2);\n")
    assert file_digest(tmp_path / "main.stan") != before
