"""The Stan baseline of the GP density model against the same log density written in NumPy."""

import numpy as np
import pytest
from scipy.special import expit, log_expit, logsumexp

from stanaccel.gpdensity.covariance import SquaredExponential
from stanaccel.gpdensity.stan_baseline import stan_data
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program


@pytest.fixture(scope="module")
def gp_density_program():
    return compile_program(program_path("gp_density"))


def numpy_log_density(model, data, theta_unc):
    """The g-dependent part of the log density: g_raw's prior, the sigmoid terms and the normaliser."""
    values = model.unflatten(model.param_constrain(theta_unc))
    N, R = data["N"], data["R"]
    points = np.vstack([data["x"], values["base_mean"] + data["eps"] @ values["base_chol"].T, data["grid"]])
    K = SquaredExponential(float(values["amplitude"]), values["lengthscale"])(points)
    g = values["mu0"] + np.linalg.cholesky(K) @ values["g_raw"]
    normaliser = logsumexp(log_expit(g[N : N + R])) - np.log(R)
    return -0.5 * values["g_raw"] @ values["g_raw"] + log_expit(g[:N]).sum() - N * normaliser, g


def test_stan_baseline_matches_numpy(gp_density_program):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(15, 2))
    data = stan_data(x, n_normaliser=20, grid=rng.normal(size=(4, 2)), seed=1)
    model = StanModel(gp_density_program, data)
    theta = 0.3 * rng.standard_normal(model.dim)
    other = theta.copy()
    other[-(15 + 20 + 4) :] = rng.standard_normal(15 + 20 + 4)  # a different g_raw, the rest unchanged
    stan_change = model.log_density(other) - model.log_density(theta)
    (a, g), (b, _) = numpy_log_density(model, data, other), numpy_log_density(model, data, theta)
    np.testing.assert_allclose(stan_change, a - b, rtol=1e-8, atol=1e-8)
    names = model.param_names(include_tp=True, include_gq=True)
    assert sum(n.startswith("density") for n in names) == 4
    values = model.unflatten(model.param_constrain(other, include_tp=True), include_tp=True)
    np.testing.assert_allclose(values["g"], g, rtol=1e-8)
    assert np.all(expit(g) > 0)


def test_stan_data_refuses_bad_input():
    with pytest.raises(ValueError, match="row 0"):
        stan_data(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="n_normaliser"):
        stan_data(np.random.default_rng(0).normal(size=(5, 1)), n_normaliser=0)
