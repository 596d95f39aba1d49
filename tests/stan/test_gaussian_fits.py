"""Stan's Pathfinder and L-BFGS optimisation through the bridge: the Gaussians they fit.

On the multivariate-normal posterior (known mean and covariance) both
recover it; on Neal's funnel the Pareto k of Pathfinder's and of the
Laplace approximation's importance weights says their Gaussian is poor, and
where the log density is flat to second order at the mode (-b^4) the
Hessian is singular.
"""

import numpy as np
import pytest

from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.optimize import RunawayError, laplace_sample, modes_from_starts, optimize
from stanaccel.stan.pathfinder import pathfinder, psis
from tests.sampling.programs import POOR_GAUSSIAN


def poor(case: int, K: int) -> dict:
    """The data of the poor-Gaussian program's ``case`` with K x's (beta, which only case 6 uses, at 1)."""
    return {"case_": case, "K": K, "beta": 1.0}


@pytest.fixture(scope="module")
def poor_program(tmp_path_factory):
    path = tmp_path_factory.mktemp("programs") / "poor.stan"  # the name test_cheap_warmup builds it under
    path.write_text(POOR_GAUSSIAN)
    return compile_program(path)


def test_pathfinder_recovers_a_gaussian_posterior(mvn_model, mvn_data):
    mean, covariance = exact_posterior(mvn_data)
    fit = pathfinder(mvn_model, seed=3)
    assert fit.draws.shape == (1000, mvn_model.dim) and fit.log_density.shape == (1000,)
    assert fit.path_draws.shape == (4000, mvn_model.dim)
    assert fit.pareto_k < 0.7 and fit.gradient_evaluations > 0 and fit.seconds > 0
    sd = np.sqrt(np.diag(covariance))
    found_mean, found_covariance = fit.gaussian()
    # 1000 resampled draws (some repeated): the mean within 0.15 sd, the covariance within 20%.
    np.testing.assert_array_less(np.abs(found_mean - mean) / sd, 0.15)
    assert np.all(np.abs(found_covariance - covariance) <= 0.2 * np.outer(sd, sd)), (
        found_covariance,
        covariance,
    )
    np.testing.assert_allclose(
        fit.log_density, [mvn_model.log_density(d, propto=False) for d in fit.draws], rtol=1e-8
    )


def test_laplace_recovers_a_gaussian_posterior(mvn_model, mvn_data):
    mean, covariance = exact_posterior(mvn_data)
    mode = optimize(mvn_model, seed=3)
    np.testing.assert_allclose(
        mode.point, mean, atol=1e-3 * np.sqrt(np.diag(covariance)).min()
    )  # L-BFGS tolerances
    # The Hessian of a Gaussian log density is exact under finite differences (up to rounding).
    np.testing.assert_allclose(mode.covariance(), covariance, rtol=1e-4)
    assert mode.hessian_problem() is None and mode.condition_number() >= 1
    assert np.abs(mode.gradient).max() < 1e-3 and mode.iterations > 0
    draws = mode.draws(4000, seed=1)
    np.testing.assert_allclose(
        np.cov(draws, rowvar=False), covariance, rtol=0.15, atol=0.05 * covariance.max()
    )


def test_optimize_with_and_without_the_jacobian(poor_program):
    model = StanModel(poor_program, poor(1, 0))
    assert np.exp(optimize(model, seed=2, jacobian=False).point[2]) == pytest.approx(2, rel=1e-2)
    with_jacobian = optimize(model, seed=2)
    assert with_jacobian.jacobian and np.exp(with_jacobian.point[2]) == pytest.approx(3, rel=1e-2)


def test_lbfgs_tries_another_start_when_one_fails(poor_program):
    """A start where Stan rejects the density (x's scale exp(a / 2) overflows) fails; the next converges."""
    model = StanModel(poor_program, poor(1, 1))
    start = np.array([2000.0, 0.0, 0.0, 0.0])
    assert modes_from_starts(model, 1, inits=start[None], seed=2) == []  # it fails from there
    mode = optimize(model, init=start, seed=2)
    assert mode.point[0] == pytest.approx(-4.5, abs=0.05) and np.exp(mode.point[2]) == pytest.approx(
        3, rel=1e-2
    )


def test_lbfgs_tries_the_origin_where_every_start_fails(poor_program):
    """A moving-average recursion (as posteriordb's arma11's) overflows from any start with |b| > 1, and
    L-BFGS's line search fails there; the last resort, the origin (CmdStan's ``init=0``), finds the mode."""
    model = StanModel(poor_program, poor(9, 1))
    starts = np.zeros((3, model.dim))
    starts[:, 1] = [1.5, -2.0, 3.0]
    assert modes_from_starts(model, 3, inits=starts, seed=2) == []  # each start fails
    mode = optimize(model, init=starts[0], seed=2, attempts=1)
    assert mode.point[1] == pytest.approx(-0.998, abs=0.01) and mode.log_density == pytest.approx(
        -125.13, abs=0.01
    )
    assert modes_from_starts(model, 1, inits=mode.point[None], seed=2)  # a mode: L-BFGS stays there


def test_pareto_k_flags_gaussians_that_miss_the_posterior(poor_program):
    # Measured over seeds 1-3: Pathfinder's k 0.81-1.04 on the funnel, Laplace's 0.90-1.14 on the Cauchy.
    assert pathfinder(StanModel(poor_program, poor(1, 9)), seed=3).pareto_k > 0.7
    cauchy = StanModel(poor_program, poor(3, 9))
    assert laplace_sample(cauchy, optimize(cauchy, seed=3), 1000, seed=3).pareto_k > 0.7
    funnel_mode = optimize(StanModel(poor_program, poor(1, 9)), seed=3)
    assert "Hessian" in funnel_mode.hessian_problem()


def test_laplace_draws_of_a_gaussian_posterior_have_a_small_pareto_k(mvn_model):
    laplace = laplace_sample(mvn_model, optimize(mvn_model, seed=3), 1000, seed=3)
    assert (
        laplace.pareto_k < 0.5
        and laplace.draws.shape == (1000, 3)
        and np.all(np.isfinite(laplace.log_density))
    )


def test_a_flat_mode_has_a_singular_hessian(poor_program):
    # Started at b = 0, L-BFGS never moves b (its gradient is 0 there), and the curvature in b is 0.
    mode = optimize(StanModel(poor_program, poor(2, 0)), init=np.zeros(3), seed=3)
    assert abs(mode.point[0] - 1) < 1e-3 and mode.point[1] == 0
    problem = mode.hessian_problem()
    assert problem is not None and ("not negative definite" in problem or "badly conditioned" in problem)
    with pytest.raises(ValueError, match="no Laplace approximation"):
        mode.covariance()


def test_equal_importance_weights_have_no_pareto_k():
    # An exact Gaussian: ArviZ's fit gave inf on ties (and noise on near-ties), refusing a perfect fit.
    log_weights, k = psis(np.full(1000, -0.9189385332046727) + np.tile([0.0, 2.2e-16], 500))
    assert np.isnan(k) and np.allclose(log_weights, -np.log(1000))
    assert psis(np.random.default_rng(0).normal(size=1000))[1] < 0.7  # real weights keep their k


def test_lbfgs_that_runs_off_to_infinity_says_the_posterior_is_improper(poor_program):
    # Case 8: s has no prior, and the log density of log s (with the Jacobian) rises without bound.
    model = StanModel(poor_program, poor(8, 0))
    with pytest.raises(RunawayError, match=r"ran off to infinity .* s at .* give s a proper prior"):
        optimize(model, seed=3)
    with pytest.raises(RunawayError, match="L-BFGS from 4 starts ran off"):
        modes_from_starts(model, 4, seed=3)


def test_laplace_draws_say_where_the_density_is_undefined(poor_program):
    # Case 7: NaN where a < 0, and the Gaussian at the mode a = 0.25 (sd 0.5) puts 31% of its draws there.
    model = StanModel(poor_program, poor(7, 0))
    laplace = laplace_sample(model, optimize(model, seed=3), 1000, seed=3)
    assert (
        laplace.undefined == pytest.approx(np.mean(laplace.draws[:, 0] < 0)) == pytest.approx(0.31, abs=0.04)
    )


def test_a_stop_request_stops_pathfinder_and_lbfgs(mvn_model):
    # What Ctrl-C does (run_threads asks each run to stop): the next iteration ends the run.
    from stanaccel.stan import optimize as optimize_module
    from stanaccel.stan import pathfinder as pathfinder_module

    module = mvn_model.program.module
    runs = [
        module.PathfinderPath(
            mvn_model._model,
            pathfinder_module._path_settings(pathfinder_module.PathfinderSettings(), 0, "{}"),
        ),
        module.Optimization(
            mvn_model._model, optimize_module._settings(optimize_module.OptimizeSettings(), "{}", True)
        ),
    ]
    for run in runs:
        run.request_stop()
        run.run()
        result = run.result()
        assert result["interrupted"] and not result["error"] and run.iterations() == 0
