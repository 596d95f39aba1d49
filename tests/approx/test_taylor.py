"""The Laplace approximation and control variates about Stan's mode, against direct NumPy computations."""

import numpy as np
import pytest
from scipy.special import expit, log_expit

from stanaccel.approx import (
    ApproximationPair,
    KeepConstants,
    central_hessian,
    check_laplace,
    control_variate_quadratic,
    control_variates,
    laplace,
    subset_of_data,
)
from stanaccel.observations import Observations
from stanaccel.programs import program_path
from stanaccel.sampling.program import posterior_mode
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.optimize import Mode
from tests.sampling.programs import REGRESSION, logistic_data, regression_data, regression_posterior

OBSERVATIONS = Observations("N", ("X", "y"))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("taylor")
    (folder / "regression.stan").write_text(REGRESSION)
    return compile_program(folder / "regression.stan"), compile_program(program_path("logistic"))


def test_central_hessian_of_a_quadratic_is_exact():
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    assert np.allclose(central_hessian(lambda x: a @ x, np.array([5.0, -7.0])), a, atol=1e-7)


def test_laplace_is_the_known_gaussian_of_a_normal_model(programs):
    data = {**regression_data(), "beta": 1.0}
    model = StanModel(programs[0], data)
    exact = KeepConstants(model)
    mode, _ = posterior_mode(model, data)  # Stan's L-BFGS and finite-difference Hessian
    assert mode.jacobian and any("Optimization terminated normally" in m for m in mode.messages)
    mean, _ = regression_posterior(data)
    X = np.column_stack([np.ones(data["N"]), data["x"]])
    precision = np.eye(2) / 4 + X.T @ X / data["sigma"] ** 2
    assert np.allclose(mode.point, mean, atol=1e-6 * np.sqrt(np.diag(np.linalg.inv(precision))).min())
    assert np.allclose(-mode.hessian, precision, rtol=1e-6)
    assert mode.log_density == pytest.approx(exact.log_density(mode.point), abs=1e-12)  # constants kept
    approx = laplace(mode)
    assert approx.param_unc_names() == ["coef.1", "coef.2"]
    for x in mean + np.random.default_rng(1).normal(0, 0.3, size=(5, 2)):
        d = x - mode.point
        value, grad = approx.log_density_gradient(x)
        assert value == pytest.approx(mode.log_density + 0.5 * d @ mode.hessian @ d, abs=1e-9)
        assert np.allclose(grad, mode.hessian @ d, atol=1e-7)
        assert value == pytest.approx(exact.log_density(x), abs=1e-6)  # the posterior is this Gaussian
    assert approx.n_gradient == 5 and approx.seconds > 0


def _mode(hessian) -> Mode:
    """A mode at the origin with this Hessian."""
    dim = len(hessian)
    return Mode(np.zeros(dim), 0.0, np.zeros(dim), np.array(hessian, dtype=float), True, 0, 0.0, [])


def test_a_flat_direction_is_named_as_a_singular_hessian():
    # log p = -(x0 + x1)^2: flat along (1, -1)
    assert check_laplace(_mode([[-2.0, -2.0], [-2.0, -2.0]])).startswith(
        "the Hessian of log pi at the mode is singular"
    )
    assert "not negative definite" in check_laplace(_mode([[-2.0, 0.0], [0.0, 1.0]]))
    assert check_laplace(_mode([[-2.0, 0.5], [0.5, -1.0]])) is None


def _numpy_log_likelihood(theta, X, y):
    """Value, gradient and Hessian of sum_n log p(y_n | theta) for logistic regression (alpha, w)."""
    Z = np.column_stack([np.ones(len(X)), X])
    eta = Z @ theta
    value = float(np.sum(y * log_expit(eta) + (1 - y) * log_expit(-eta)))
    p = expit(eta)
    return value, Z.T @ (y - p), -(Z.T * (p * (1 - p))) @ Z


def test_control_variates_match_a_direct_numpy_computation(programs):
    n, m, seed = 300, 30, 4
    data = {**logistic_data(n, seed=2), "beta": 1.0}
    model = StanModel(programs[1], data)
    exact = KeepConstants(model)
    mode, _ = posterior_mode(model, data)
    subset = KeepConstants(subset_of_data(model, data, m, seed=seed, scale=True, observations=OBSERVATIONS))
    approx = control_variates(subset, control_variate_quadratic(subset, mode))
    indices = np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False))  # subset_of_data's
    X, y, scale = data["X"], data["y"], data["prior_scale"]

    def log_prior(theta):
        value = -0.5 * np.sum(theta**2) / scale**2 - len(theta) * np.log(scale * np.sqrt(2 * np.pi))
        return value, -theta / scale**2

    def taylor(theta, full):  # T_X about the mode, from l_X's value, gradient and Hessian there
        value, grad, hess = _numpy_log_likelihood(mode.point, *((X, y) if full else (X[indices], y[indices])))
        d = theta - mode.point
        return value + grad @ d + 0.5 * d @ hess @ d, grad + hess @ d

    # the mode: l_full's gradient all but cancels the prior's, and Stan's gradient there is theirs
    gradient = _numpy_log_likelihood(mode.point, X, y)[1] + log_prior(mode.point)[1]
    assert np.allclose(gradient, mode.gradient, atol=1e-8) and mode.newton_decrement() < 1e-3
    points = mode.point + np.random.default_rng(3).normal(0, 0.2, size=(5, mode.point.size))
    for theta in points:
        prior, prior_grad = log_prior(theta)
        l_s, l_s_grad, _ = _numpy_log_likelihood(theta, X[indices], y[indices])
        t_s, t_s_grad = taylor(theta, full=False)
        t_full, t_full_grad = taylor(theta, full=True)
        expected = prior + n / m * (l_s - t_s) + t_full
        expected_grad = prior_grad + n / m * (l_s_grad - t_s_grad) + t_full_grad
        value, grad = approx.log_density_gradient(theta)
        assert value == pytest.approx(expected, abs=1e-6)
        assert np.allclose(grad, expected_grad, rtol=1e-6, atol=1e-6)
        assert approx.log_density(theta) == pytest.approx(value, abs=1e-9)
    # at the mode pi* matches pi to second order
    assert approx.log_density(mode.point) == pytest.approx(exact.log_density(mode.point), abs=1e-9)
    assert approx.param_unc_names() == exact.param_unc_names()


def test_control_variate_spread_shrinks_with_n_where_a_subsets_grows(programs):
    spread = {}
    for n in (1000, 8000):
        data = {**logistic_data(n, seed=5), "beta": 1.0}
        model = StanModel(programs[1], data)
        exact = KeepConstants(model)
        mode, _ = posterior_mode(model, data)
        subset = KeepConstants(
            subset_of_data(model, data, 100, seed=1, scale=True, observations=OBSERVATIONS)
        )
        approx = control_variates(subset, control_variate_quadratic(subset, mode))
        # draws of the Laplace approximation stand for posterior draws (the posterior is near Gaussian)
        points = np.random.default_rng(0).multivariate_normal(mode.point, np.linalg.inv(-mode.hessian), 100)
        spread[n] = [
            ApproximationPair(exact, d).discrepancy(points)["log_ratio_sd"] for d in (subset, approx)
        ]
    (subset_small, cv_small), (subset_large, cv_large) = spread[1000], spread[8000]
    assert subset_large > subset_small > 2  # a scaled subset's spread grows with N
    assert cv_large < cv_small < 0.2  # the control variates' shrinks
    assert cv_small < subset_small / 20
