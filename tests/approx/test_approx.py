"""Cheap approximations of Stan posteriors, and the exact samplers on real Stan instances."""

import numpy as np
import pytest
from scipy.stats import norm

from stanaccel.approx import ApproximationPair, KeepConstants, inducing_inputs, low_rank, subset_of_data
from stanaccel.datasets import generate, take_observations
from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.diagnostics import mcse_z_scores, to_inference_data
from stanaccel.kernels import DiscretizingChain, RandomWalkMetropolis, run_chains
from stanaccel.stan import StanModel


@pytest.fixture(scope="module")
def gp(gp_program):
    dataset = generate("gp_ard", N=30, D=2, seed=4, ell=[1.5, 2.5], sigma_f=1.0, sigma_n=0.5)
    model = StanModel(gp_program, dataset.data)
    points = np.random.default_rng(0).normal(0, 0.5, size=(4, model.dim))
    return model, dataset.data, points


@pytest.mark.parametrize("kind", ["fitc", "sor"])
def test_low_rank_with_every_input_inducing_is_exact(gp, kind):
    model, data, points = gp
    approx = KeepConstants(low_rank(data, m=data["N"], kind=kind))
    exact = KeepConstants(model)
    for x in points:
        value, grad = approx.log_density_gradient(x)
        exact_value, exact_grad = exact.log_density_gradient(x)
        assert value == pytest.approx(exact_value, abs=1e-3)
        assert np.allclose(grad, exact_grad, rtol=1e-3, atol=1e-3)
        assert approx.log_density(x) == pytest.approx(value, abs=1e-9)  # values agree with gradient calls
    assert approx.seconds > 0 and approx.n_gradient == len(points)


def test_fewer_inducing_inputs_approximate_less_well(gp):
    model, data, points = gp
    spread = [
        ApproximationPair(KeepConstants(model), KeepConstants(low_rank(data, m))).discrepancy(points)
        for m in (3, 15)
    ]
    assert spread[0]["log_ratio_sd"] > spread[1]["log_ratio_sd"]


def test_pair_reports_cost(gp):
    model, data, points = gp
    cost = ApproximationPair(KeepConstants(model), KeepConstants(low_rank(data, 5))).cost(points[:2])
    assert cost["exact_seconds"] > 0 and cost["relative_cost"] > 0
    assert set(cost) >= {"approx_gradient_seconds", "relative_gradient_cost"}


def test_subset_of_data(gp):
    model, data, points = gp
    subset = subset_of_data(model, data, 10, seed=2)
    scaled = subset_of_data(model, data, 10, seed=2, scale=True)
    assert subset.dim == model.dim
    prior = model.with_data({**data, "beta": 0.0})
    # Scaling multiplies the subset's log likelihood by N / m = 3.
    loglik = subset.log_density(points[0]) - prior.log_density(points[0])
    scaled_loglik = scaled.log_density(points[0]) - prior.log_density(points[0])
    assert scaled_loglik == pytest.approx(3 * loglik, rel=1e-9)


def test_bad_approximations_are_refused_by_name(gp, mvn_model):
    model, data, _ = gp
    with pytest.raises(ValueError, match="subset size m"):
        subset_of_data(model, data, 0)
    with pytest.raises(ValueError, match="inducing inputs m"):
        low_rank(data, data["N"] + 1)
    with pytest.raises(ValueError, match="unknown low-rank"):
        low_rank(data, 5, kind="nystrom-ish")
    with pytest.raises(ValueError, match="inducing-input method"):
        inducing_inputs(np.asarray(data["x"]), 5, method="grid")
    with pytest.raises(ValueError, match="dimension"):
        ApproximationPair(KeepConstants(model), KeepConstants(mvn_model))


def test_kmeans_inducing_inputs(gp):
    _, data, _ = gp
    z = inducing_inputs(np.asarray(data["x"]), 6, method="kmeans")
    assert z.shape == (6, 2)


def test_discretizing_chain_on_stan_instances_recovers_the_exact_posterior(mvn_program):
    """pi: mvn_mean on 40 observations; pi*: the same program on 8 of them (a poor pi*)."""
    data = generate("mvn_mean", N=40, D=2, seed=12).data
    mean, cov = exact_posterior(data)
    sd = np.sqrt(np.diag(cov))
    model = StanModel(mvn_program, data)

    def factory(chain):
        approx = KeepConstants(model.with_data(take_observations(data, np.arange(8), "mvn_mean")))
        inner = RandomWalkMetropolis(approx, scale=1.2, covariance=cov)
        return DiscretizingChain(KeepConstants(model.with_data(data)), inner, moves=2, jump=3)

    starts = mean + sd * np.random.default_rng(3).normal(size=(4, 2))
    run = run_chains(factory, starts, 1500, seed=9)
    assert run.exact
    idata = to_inference_data({"posterior": {"theta": run.positions[:, 100:]}})
    z_mean, z_sd = mcse_z_scores(idata, "theta", mean, sd)
    limit = norm.ppf(1 - 1e-3 / 8)
    assert np.all(np.abs(z_mean) < limit) and np.all(np.abs(z_sd) < limit), (z_mean, z_sd)
    assert all(s["cache_hits"] > 0 for s in run.summaries)
