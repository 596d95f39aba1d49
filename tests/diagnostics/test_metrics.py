"""Convergence metrics and InferenceData conversion on draws with known properties."""

import numpy as np
import pytest

from stanaccel.diagnostics import (
    convergence_metrics,
    mcse_z_scores,
    method_statistics,
    method_warnings,
    reference_z_scores,
    to_inference_data,
)


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


def test_converged_draws_have_no_warnings_and_stuck_ones_say_why():
    rng = np.random.default_rng(4)
    good = convergence_metrics(to_inference_data(groups(rng.normal(size=(4, 500, 2)))))
    assert good["converged"] is True and good["warnings"] == []
    draws = rng.normal(size=(4, 500, 2))
    draws[0, :, 1] += 5.0
    bad = convergence_metrics(to_inference_data(groups(draws)))
    assert bad["converged"] is False
    assert bad["warnings"][0].startswith(
        f"R-hat {bad['rhat_max']:.3g} (x[2]) is above 1.01"
    )  # the second coordinate, named from 1


def test_too_few_effective_draws_are_flagged_per_chain():
    rng = np.random.default_rng(5)
    walk = np.cumsum(rng.normal(size=(4, 300, 1)), axis=1) * 0.05 + rng.normal(size=(4, 1, 1)) * 0.01
    metrics = convergence_metrics(to_inference_data(groups(walk)))
    assert metrics["ess_bulk_min"] < 400
    assert any(w.startswith("bulk ESS") and "below 400 (100 per chain)" in w for w in metrics["warnings"])


def test_a_constant_quantity_does_not_hide_a_stuck_one():
    draws = np.random.default_rng(6).normal(size=(4, 200))
    draws[0] += 5.0
    idata = to_inference_data({"posterior": {"a_constant": np.ones((4, 200)), "x": draws}})
    metrics = convergence_metrics(idata)  # the constant's R-hat is NaN, and comes first
    assert metrics["rhat_max"] > 1.5 and not metrics["converged"]


def test_divergences_and_the_largest_tree_depth_are_flagged():
    rng = np.random.default_rng(7)
    depth = np.full((4, 500), 3)
    depth[1, :7] = 5
    diverging = np.zeros((4, 500), dtype=bool)
    diverging[2, 10:13] = True
    idata = to_inference_data(
        {
            "posterior": {"x": rng.normal(size=(4, 500))},
            "sample_stats": {"diverging": diverging, "tree_depth": depth},
            "attrs": {"max_depth": 5},
        }
    )
    metrics = convergence_metrics(idata)
    assert metrics["divergences"] == 3 and metrics["max_tree_depth_hits"] == 7
    assert metrics["warnings"] == [
        "3 of 2000 transitions diverged: the sampler could not follow the posterior somewhere, so the "
        "draws may be biased; raise the target acceptance (delta) or reparametrise",
        "7 of 2000 transitions hit the largest tree depth 5: NUTS's trajectories were cut short; raise "
        "max_depth or reparametrise",
    ]
    assert convergence_metrics(idata, max_depth=6)["converged"] is False  # the divergences remain


def test_method_warnings_name_the_statistic_below_its_threshold():
    healthy = method_statistics(
        [
            {
                "swap_acceptance": np.array([0.5, 0.3]),
                "round_trips": 2,
                "tt_acceptance": 0.4,
                "betas": [1, 0.5, 0.2],
            }
        ]
        * 2
    )
    assert "betas" not in healthy and healthy["round_trips"] == [2, 2]
    assert method_warnings(healthy) == []
    low = method_statistics(
        [
            {
                "swap_acceptance": [0.5, 0.05],
                "round_trips": 0,
                "tt_acceptance": 0.3,
                "inner_acceptance": [0.3, 0.01, 0.2],
            },
            {
                "swap_acceptance": [0.4, 0.2],
                "round_trips": 0,
                "tt_acceptance": 0.0007,
                "move_acceptance": 0.01,
            },
            None,  # a kernel without a summary
        ]
    )
    reasons = method_warnings(low)
    assert reasons[0].startswith("swap acceptance below 0.1 between levels 1 and 2: 0.05 (worst chain")
    assert reasons[1].startswith("inner acceptance below 0.05 at level 1: 0.01 (worst chain)")
    assert reasons[2].startswith("no round trip between the coldest and hottest level in any chain")
    assert reasons[3].startswith("trajectory acceptance 0.0007 in chain 1 is below 0.1")
    assert reasons[4].startswith("mark acceptance 0.01 in chain 0 is below 0.05")
