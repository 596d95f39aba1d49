"""``pt`` with its ladder adapted on a Stan program: the evidence against closed forms, and a bimodal
posterior that NUTS gets wrong and default-setting PT gets right."""

import arviz as az
import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.datasets.mvn_mean import exact_log_evidence
from stanaccel.kernels.schedule import levels_for_acceptance, levels_for_trajectories
from stanaccel.sampling import sample
from stanaccel.stan import compile_program
from tests.sampling.programs import BIMODAL, BIMODAL_LOG_EVIDENCE, BIMODAL_RIGHT

QUIET = {"progress": False}


def evidence(result) -> tuple[float, float]:
    statistics = result.metrics()["method_statistics"]
    chains = np.asarray(statistics["log_evidence"])
    errors = np.asarray(statistics["log_evidence_mcse"])
    return float(chains.mean()), float(np.sqrt(np.sum(errors**2)) / len(errors))


def test_pt_adapts_its_ladder_and_reports_the_evidence_of_a_conjugate_model(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    result = sample(mvn_program, data, "pt", {"warmup": 300, "draws": 600}, seed=3, **QUIET)
    log_z, mcse = evidence(result)
    assert abs(log_z - exact_log_evidence(data)) < 3 * mcse and mcse < 0.1
    metrics = result.metrics()
    schedule = metrics["schedule"]
    assert schedule["betas"][0] == 1 and schedule["betas"][-1] == 0  # down to the prior
    assert len(schedule["rounds"]) == 8 and schedule["levels"] == len(result.config.betas)
    assert metrics["setting_sources"]["betas"] == "adapted" and "schedule" in metrics["charged_seconds"]
    assert max(schedule["rounds"][-1]["rejection"]) < 0.5
    inner = np.asarray(schedule["rounds"][-1]["inner_acceptance"])  # each level's step adapted to 0.8
    assert np.all(np.abs(inner - 0.8) < 0.15) and schedule["step_factors"] == result.config.step_factors


def test_a_given_ladder_is_kept_and_given_levels_are_kept(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    given = sample(mvn_program, data, "pt", {"warmup": 200, "draws": 50, "betas": [1, 0.5, 0.2]}, **QUIET)
    assert given.config.betas == [1, 0.5, 0.2] and "schedule" not in given.metrics()
    assert "log_evidence" not in given.metrics()["method_statistics"]  # its ladder stops above 0
    levels = sample(mvn_program, data, "pt", {"warmup": 200, "draws": 50, "levels": 4, "schedule_rounds": 4},
                    **QUIET)  # fmt: skip
    assert len(levels.config.betas) == 5 and levels.metrics()["schedule"]["levels"] == 5


def test_spt_places_its_levels_on_whole_distinct_subsets(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    result = sample(mvn_program, data, "spt", {"warmup": 200, "draws": 50, "schedule_rounds": 5}, seed=3,
                    **QUIET)  # fmt: skip
    sizes = np.asarray(result.config.betas) * 20
    assert len(sizes) <= 7 and sizes[0] == 20 and np.all(np.diff(sizes) < 0)  # levels = 6, not the barrier's
    np.testing.assert_allclose(sizes, np.round(sizes))
    assert [len(r["betas"]) for r in result.metrics()["schedule"]["rounds"]] == [7] * 5


@pytest.fixture(scope="module")
def bimodal(tmp_path_factory):
    path = tmp_path_factory.mktemp("bimodal") / "bimodal.stan"
    path.write_text(BIMODAL)
    return compile_program(path)


def right_share(result) -> float:
    return float((result.to_inference_data().posterior["theta"].values[..., 0] > 0).mean())


def test_default_pt_recovers_the_mode_weights_that_nuts_misses(bimodal):
    nuts = sample(bimodal, {}, "nuts", {"warmup": 300, "draws": 500}, seed=2, **QUIET)
    assert abs(right_share(nuts) - BIMODAL_RIGHT) > 0.05  # each chain stays in the mode it started in
    pt = sample(bimodal, {}, "pt", {"draws": 2000}, seed=2, **QUIET)
    right = pt.to_inference_data().posterior["theta"].values[..., 0] > 0
    mcse = az.mcse(right.astype(float)).item()  # 0.017 here: 0.685 (seeds 1-8 of 1000 draws: 0.615-0.699)
    assert abs(right.mean() - BIMODAL_RIGHT) < min(0.05, 4 * mcse), (right.mean(), mcse)
    log_z, mcse = evidence(pt)
    assert abs(log_z - BIMODAL_LOG_EVIDENCE) < 3 * mcse and mcse < 0.15
    modes = pt.metrics()["modes"]  # the warm-up's NUTS chains settled in both modes, and pt says so
    assert len(modes["regions"]) == 2 and "separated regions" in modes["message"]


def test_tempered_transitions_take_the_pilot_barrier_with_the_levels_trajectories_need(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    result = sample(mvn_program, data, "tt", {"warmup": 300, "draws": 300, "schedule_rounds": 6}, seed=3,
                    **QUIET)  # fmt: skip
    schedule = result.metrics()["schedule"]
    [pilot] = schedule["trajectory_pilot"]  # the model's count, then the pilot's correction
    assert pilot["levels"] == levels_for_trajectories(schedule["barrier"])
    assert len(result.config.betas) == levels_for_acceptance(pilot["levels"], pilot["acceptance"])
    assert result.config.betas[-1] == 0 and schedule["levels"] == len(result.config.betas)
    assert 0.15 < np.mean(result.metrics()["method_statistics"]["tt_acceptance"]) < 0.6  # aimed at 0.3
