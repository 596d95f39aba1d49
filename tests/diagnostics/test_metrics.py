"""Convergence metrics and InferenceData conversion on draws with known properties."""

import numpy as np
import pytest

from stanaccel.diagnostics import convergence_metrics, mcse_z_scores, reference_z_scores, to_inference_data


def groups(draws):
    return {"posterior": {"x": draws}, "attrs": {"sampler": "iid", "exact": True}}


def test_iid_draws_have_full_ess_and_rhat_near_one():
    draws = np.random.default_rng(0).normal(size=(4, 500, 2))
    idata = to_inference_data(groups(draws))
    metrics = convergence_metrics(idata, wall_seconds=2.0, gradient_evaluations=1000)
    assert metrics["ess_bulk_min"] > 1400
    assert metrics["rhat_max"] < 1.01
    assert metrics["ess_per_second"] == pytest.approx(metrics["ess_bulk_min"] / 2.0)
    assert set(metrics["ess_bulk"]) == {"x[1]", "x[2]"}
    assert idata.posterior.attrs["sampler"] == "iid"


def test_stuck_chains_are_flagged():
    draws = np.random.default_rng(1).normal(size=(4, 500, 1))
    draws[0] += 5.0  # one chain elsewhere
    metrics = convergence_metrics(to_inference_data(groups(draws)))
    assert metrics["rhat_max"] > 1.5


def test_mcse_z_scores_detect_a_biased_sampler():
    rng = np.random.default_rng(2)
    good = to_inference_data(groups(rng.normal(size=(4, 1000, 1))))
    bad = to_inference_data(groups(rng.normal(loc=0.2, size=(4, 1000, 1))))
    z_mean, z_sd = mcse_z_scores(good, "x", np.zeros(1), np.ones(1))
    assert np.all(np.abs(z_mean) < 3.5) and np.all(np.abs(z_sd) < 3.5)
    z_bad, _ = mcse_z_scores(bad, "x", np.zeros(1), np.ones(1))
    assert np.all(np.abs(z_bad) > 3.5)


def test_reference_z_scores_compare_two_runs():
    rng = np.random.default_rng(3)
    reference = to_inference_data(groups(rng.normal(size=(2, 1000, 2))))
    same = to_inference_data(groups(rng.normal(size=(2, 1000, 2))))
    shifted = to_inference_data(groups(rng.normal(loc=[0.0, 0.3], size=(2, 1000, 2))))
    wider = to_inference_data(groups(rng.normal(scale=[1.0, 1.3], size=(2, 1000, 2))))
    assert reference_z_scores(same, reference).shape == (2, 2)
    assert np.all(np.abs(reference_z_scores(same, reference)) < 3.5)
    assert np.abs(reference_z_scores(shifted, reference)[0, 1]) > 3.5
    assert np.abs(reference_z_scores(wider, reference)[1, 1]) > 3.5
