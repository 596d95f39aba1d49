"""The Stan baseline of the GP density model: its log density against the same formula in NumPy,
its input checks, and a short NUTS fit of a 1-D mixture."""

import numpy as np
import pytest
from scipy.special import log_expit, logsumexp

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import SquaredExponential
from stanaccel.gpdensity.stan_baseline import fit_stan_baseline, stan_data
from stanaccel.gpdensity.synthetic import distances, target
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program


@pytest.fixture(scope="module")
def gp_density_program():
    return compile_program(program_path("gp_density"))


def log_lognormal(value, log_median, sd):
    z = (np.log(value) - log_median) / sd
    return -0.5 * z**2 - np.log(value * sd * np.sqrt(2 * np.pi))


def numpy_model(data, values):
    """The program's quantities from its constrained parameters, in NumPy: g at the inducing points,
    g at any points, log Z, and the full log density (no Jacobian, constants included)."""
    mu0, amp, ls = float(values["mu0"]), float(values["amplitude"]), np.asarray(values["lengthscale"])
    kernel = SquaredExponential(amp, ls)
    K_chol = np.linalg.cholesky(kernel(data["inducing"]))  # jitter 1e-6 amp^2, as the program
    g_inducing = mu0 + K_chol @ values["g_raw"]
    alpha = np.linalg.solve(K_chol.T, values["g_raw"])

    def g(points):
        return mu0 + kernel(points, data["inducing"]) @ alpha

    base = GaussianBase(values["base_mean"], values["base_chol"])
    q0 = GaussianBase(data["q0_mean"], data["q0_chol"])
    n_base, n_fixed = data["R_base"], data["R_fixed"]
    R = n_base + n_fixed
    points = np.vstack([values["base_mean"] + data["eps"] @ values["base_chol"].T, data["fixed_points"]])
    log_weight = np.zeros(R)
    if n_fixed:
        log_pi = base.logpdf(points)
        mixture = np.logaddexp(np.log(n_base / R) + log_pi, np.log(n_fixed / R) + q0.logpdf(points))
        log_weight = log_pi - mixture
    log_z = logsumexp(log_weight + log_expit(g(points))) - np.log(R)

    N, D = data["N"], data["D"]
    lp = -0.5 * values["g_raw"] @ values["g_raw"] - 0.5 * data["L"] * np.log(2 * np.pi)
    lp += log_lognormal(amp, 0.0, 1.5) + np.sum(log_lognormal(ls, np.log(data["scale"]), 1.5))
    lp += -0.5 * (mu0 / data["mu0_sd"]) ** 2 - np.log(data["mu0_sd"] * np.sqrt(2 * np.pi))
    lp += -np.sum(np.log(np.diag(values["base_chol"])))
    lp += log_expit(g(data["x"])).sum() + base.logpdf(data["x"]).sum() - N * log_z
    assert D == len(ls)
    return {"g_inducing": g_inducing, "g": g, "log_z": log_z, "lp": lp, "base": base}


@pytest.mark.parametrize("fixed_fraction", [0.4, 0.0])
def test_stan_baseline_matches_numpy(gp_density_program, fixed_fraction):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 2)) @ np.array([[1.0, 0.3], [0.0, 0.7]])
    data = stan_data(x, n_inducing=6, n_normaliser=20, at=rng.normal(size=(4, 2)), seed=1,
                     fixed_fraction=fixed_fraction)  # fmt: skip
    assert data["R_base"] + data["R_fixed"] == 20 and data["R_fixed"] == round(20 * fixed_fraction)
    model = StanModel(gp_density_program, data)
    theta = 0.3 * rng.standard_normal(model.dim)
    other = theta.copy()
    other[-data["L"] :] = rng.standard_normal(data["L"])  # a different g_raw, the rest unchanged

    values, other_values = (model.unflatten(model.param_constrain(t)) for t in (theta, other))
    mine, other_mine = numpy_model(data, values), numpy_model(data, other_values)
    change = model.log_density(other) - model.log_density(theta)
    np.testing.assert_allclose(change, other_mine["lp"] - mine["lp"], rtol=1e-8, atol=1e-8)
    for point, expected in ((theta, mine), (other, other_mine)):
        full = model.log_density(point, propto=False, jacobian=False)
        np.testing.assert_allclose(full, expected["lp"], rtol=1e-8)

    out = model.unflatten(model.param_constrain(other, include_tp=True, include_gq=True),
                          include_tp=True, include_gq=True)  # fmt: skip
    np.testing.assert_allclose(out["g_inducing"], other_mine["g_inducing"], rtol=1e-8)
    np.testing.assert_allclose(out["log_z"], other_mine["log_z"], rtol=1e-8)
    expected = (
        log_expit(other_mine["g"](data["at"])) + other_mine["base"].logpdf(data["at"]) - other_mine["log_z"]
    )
    np.testing.assert_allclose(out["log_density"], expected, rtol=1e-8)

    # g at the data and at the (moved) normaliser points, read back through log_density there
    moved = other_values["base_mean"] + data["eps"] @ other_values["base_chol"].T
    for points in (data["x"], moved, data["fixed_points"]):
        if len(points) == 0:
            continue
        there = StanModel(gp_density_program, {**data, "G": len(points), "at": points})
        log_density = there.unflatten(there.param_constrain(other, include_gq=True), include_gq=True)[
            "log_density"
        ]
        g = log_density - other_mine["base"].logpdf(points) + other_mine["log_z"]
        np.testing.assert_allclose(g, log_expit(other_mine["g"](points)), rtol=1e-8)


def test_stan_data_refuses_bad_input():
    x = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="row 0"):
        stan_data(np.array([[np.nan], [1.0], [2.0]]))
    with pytest.raises(ValueError, match="n_inducing"):
        stan_data(x, n_inducing=1)
    with pytest.raises(ValueError, match="inducing points"):
        stan_data(x, inducing=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="n_normaliser"):
        stan_data(x, n_normaliser=0)
    with pytest.raises(ValueError, match="fixed_fraction"):
        stan_data(x, fixed_fraction=1.5)
    with pytest.raises(ValueError, match=r"at must be an \(n, 2\) array"):
        stan_data(x, at=np.zeros((5, 3)))
    with pytest.raises(ValueError, match=r"at must be an \(n, 2\) array"):
        stan_data(x, at=np.zeros(5))
    with pytest.raises(ValueError, match="at has NaN"):
        stan_data(x, at=np.array([[0.0, np.nan]]))
    with pytest.raises(ValueError, match=r"at must be an \(n, 2\) array"):
        fit_stan_baseline(x, at=np.zeros((5, 1)))
    one_d = stan_data(x[:, 0], at=np.linspace(-1, 1, 7), n_inducing=4, n_normaliser=9)
    assert one_d["at"].shape == (7, 1) and one_d["L"] == 4 and one_d["R_base"] + one_d["R_fixed"] == 9


@pytest.mark.slow
def test_nuts_fit_of_a_bimodal_density(gp_density_program):
    truth = target("bimodal_1d")
    data = truth.sample(150, np.random.default_rng(0))
    grid, cell = truth.grid(150)
    # 15 inducing points, 100 normaliser points, 150 draws (was 20, 150, 200: half the time): the
    # estimate's Hellinger distance is 0.45 of the Gaussian base's (0.42 before), its normaliser 0.990.
    fit = fit_stan_baseline(data, at=grid, n_inducing=15, n_normaliser=100, chains=2, warmup=150, draws=150,
                            seed=0)  # fmt: skip
    assert fit["density"].shape == (2, 150, 150) and np.all(np.isfinite(fit["density"]))
    assert fit["amplitude"].shape == (2, 150) and fit["lengthscale"].shape == (2, 150, 1)
    assert fit["mu0"].shape == (2, 150)
    assert fit["divergences"] <= 3
    assert fit["warmup_seconds"] > 0 and fit["sampling_seconds"] > 0 and fit["step_size"] > 1e-2
    assert abs(fit["density_mean"].sum() * cell - 1) < 0.05  # the Monte Carlo normaliser is close
    estimate = distances(truth, fit["density_mean"], grid, cell)["hellinger"]
    base = distances(truth, np.exp(GaussianBase.fit(data).logpdf(grid)), grid, cell)["hellinger"]
    assert estimate < 0.7 * base, (estimate, base)
