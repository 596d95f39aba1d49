"""Tempering on real Stan posteriors: ladders of Stan instances, exactness, the study workflow."""

import json

import numpy as np
import pytest
from scipy.stats import norm

from stanaccel.datasets import generate, take_observations
from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.diagnostics import mcse_z_scores, to_inference_data
from stanaccel.sampling.build import KernelFactory
from stanaccel.sampling.config import make_config
from stanaccel.sampling.run import run_sampler
from stanaccel.sampling.warmup import Adaptation
from stanaccel.stan import StanModel
from stanaccel.workflow import run_workflow

STUDY = """
[workflow]
name = "study"
seed = 3

[[steps]]
name = "gp"
action = "tempering_study"
program = "gp_ard"
sizes = [{ N = 16, D = 2 }]
samplers = ["hmc", "pt", "stt"]
inner = ["hmc"]
chains = 2
draws = 60
nuts_warmup = 100
tune_from_nuts = true
start = "nuts_warmup"
levels = 3
schedule_rounds = 4
"""


def build_kernel(method: str, model, data, **settings):
    """One chain's kernel of ``method`` with ``settings`` and nothing tuned."""
    config, _ = make_config(method, {"precondition": False, **settings}).resolve({})
    return KernelFactory(
        config, model, data, Adaptation(None, np.ones(model.dim), np.zeros((1, model.dim)), None, 0)
    )(0)


@pytest.fixture(scope="module")
def mvn(mvn_program):
    data = generate("mvn_mean", N=40, D=2, seed=8).data
    return StanModel(mvn_program, data), data


def test_take_observations_keeps_the_rest(mvn):
    _, data = mvn
    sub = take_observations(data, [0, 5, 7], "mvn_mean")
    assert sub["N"] == 3 and sub["x"].shape == (3, 2)
    np.testing.assert_array_equal(sub["Sigma"], data["Sigma"])
    with pytest.raises(ValueError, match="no observation layout"):
        take_observations(data, [0], "unknown")


def test_power_ladder_of_stan_instances_matches_the_beta_data_variable(mvn):
    model, data = mvn
    kernel = build_kernel("pt", model, data, levels=3, beta_min=0.25)
    theta = np.array([0.3, -0.2])
    for level, beta in enumerate(kernel.ladder.betas):
        tempered = model.with_data({**data, "beta": float(beta)})
        assert kernel.ladder.log_density(level, theta) == pytest.approx(  # constants kept (the evidence)
            tempered.log_density(theta, propto=False), rel=1e-10
        )


def test_subsampled_ladder_of_stan_instances_is_nested(mvn):
    model, data = mvn
    kernel = build_kernel("spt", model, data, levels=3, beta_min=0.25)
    sizes = [int(json.loads(level.data_json)["N"]) for level in kernel.ladder.levels]
    assert sizes == [40, 25, 16, 10]


@pytest.mark.parametrize("method", ["pt", "stt"])
@pytest.mark.slow
def test_tempering_on_stan_recovers_the_exact_posterior(mvn, method):
    model, data = mvn
    mean, cov = exact_posterior(data)
    sd = np.sqrt(np.diag(cov))
    settings = {"inner": "hmc", "levels": 3, "beta_min": 0.25, "step_size": 0.15, "n_steps": 5,
                "temperature_scaling": "mh", "precondition": False, "chains": 4, "draws": 800}  # fmt: skip
    starts = mean + 3 * sd * np.random.default_rng(1).normal(size=(4, 2))
    tuning = Adaptation(None, np.ones(2), starts, None, 0.0)
    run = run_sampler(make_config(method, settings), model, data, tuning, seed=4).run
    assert run.exact and run.evaluations.min() > 0
    idata = to_inference_data({"posterior": {"theta": run.positions[:, 200:]}})
    z_mean, z_sd = mcse_z_scores(idata, "theta", mean, sd)
    limit = norm.ppf(1 - 1e-3 / 8)
    assert np.all(np.abs(z_mean) < limit) and np.all(np.abs(z_sd) < limit), (z_mean, z_sd)
    assert set(run.constrained) == {"theta"}


@pytest.mark.slow
def test_tempering_study_writes_its_tables(tmp_path, gp_program):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    context = run_workflow(path, output=tmp_path / "out", progress=False)
    rows = context.results["gp"]["rows"]
    assert [r["sampler"] for r in rows] == ["Stan NUTS (warm-up included)", "HMC", "PT (HMC)", "STT (HMC)"]
    pt = rows[2]
    assert pt["cost_vs_inner"] > 1 and len(pt["swap_acceptance"].split()) == 3
    assert pt["levels"] == rows[3]["levels"] == 4 and rows[1]["levels"] == ""  # levels = 3 above the target
    assert rows[1]["warmup_seconds"] == pytest.approx(rows[0]["warmup_seconds"])
    for name in ("table.csv", "table.md", "rhat_trace.csv", "table.json"):
        assert (tmp_path / "out" / "gp" / name).is_file()
