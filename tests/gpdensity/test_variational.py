"""The GP density model's variational algorithm: the bound, the closed-form factors, the estimate.

Real TensorFlow (the bound's gradient) and scikit-learn (k-means for the inducing points); no Stan.
"""

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import digamma

from stanaccel.diagnostics import to_inference_data
from stanaccel.gpdensity import GaussianBase, VariationalDensity
from stanaccel.gpdensity.base_measure import normal_grid
from stanaccel.gpdensity.synthetic import distances, target
from stanaccel.gpdensity.variational import VariationalWarning, _polyagamma_mean, _tensor, solve_alpha


@pytest.fixture(scope="module")
def bimodal():
    truth = target("bimodal_1d")
    return truth, truth.sample(200, np.random.default_rng(7))


def closed_form_run(data, iterations, **options):
    """The closed-form updates alone at the starting hyperparameters; the bound after each."""
    method = VariationalDensity(data, update_hyperparameters=False, mu0=-0.8, **options)
    theta = method._variables(*method.start)
    size = len(method.inducing)
    m, S, alpha = np.zeros(size), np.eye(size), float(len(data))
    bounds = []
    for _ in range(iterations):
        m, S, alpha = method.update_q(theta, m, S, alpha)
        bounds.append(method.bound(theta, m, S, alpha)[0])
    return method, theta, (m, S, alpha), np.array(bounds)


@pytest.mark.slow
def test_closed_form_updates_never_decrease_the_bound(bimodal):
    _, data = bimodal
    for seed, n_inducing in [(0, 20), (1, 40)]:
        *_, bounds = closed_form_run(data, 25, n_inducing=n_inducing, quadrature=100, seed=seed)
        assert np.all(np.diff(bounds) >= -1e-9 * np.abs(bounds[1:])), np.diff(bounds)
        assert bounds[-1] > bounds[0] + 1.0


def test_converged_factors_maximise_the_bound(bimodal):
    """At the fixed point of the updates, any small change of q(u) or q(lambda) lowers the bound:
    the closed forms and the bound agree."""
    _, data = bimodal
    method, theta, (m, S, alpha), bounds = closed_form_run(data, 400, n_inducing=12, quadrature=80)
    best = method.bound(theta, m, S, alpha)[0]
    rng = np.random.default_rng(0)
    for _ in range(10):
        direction = rng.standard_normal(len(m))
        assert method.bound(theta, m + 0.05 * direction, S, alpha)[0] < best
        root = np.linalg.cholesky(S) @ (np.eye(len(m)) + 0.05 * np.diag(rng.standard_normal(len(m))))
        assert method.bound(theta, m, root @ root.T, alpha)[0] < best
    for factor in (0.98, 1.02):
        assert method.bound(theta, m, S, alpha * factor)[0] < best


def test_solve_alpha_is_the_fixed_point():
    for n, rho in [(10, 0.3), (500, 0.9), (3, 1e-4)]:
        alpha = solve_alpha(n, rho)
        assert alpha == pytest.approx(n + np.exp(digamma(alpha)) * rho, rel=1e-9)


def test_bound_gradient_matches_finite_differences(bimodal):
    _, data = bimodal
    method = VariationalDensity(data[:60], n_inducing=8, quadrature=50, seed=3)
    theta = method._variables(*method.start)
    rng = np.random.default_rng(1)
    m, S, alpha = 0.3 * rng.standard_normal(8), 0.5 * np.eye(8), 150.0
    gradient = -method._compiled()["gradient"](theta.read_value(), _tensor(m), _tensor(S), _tensor(alpha))
    base = theta.numpy()
    for i in range(len(base)):
        step = np.zeros_like(base)
        step[i] = 1e-5
        theta.assign(base + step)
        up = method.bound(theta, m, S, alpha)[1]
        theta.assign(base - step)
        down = method.bound(theta, m, S, alpha)[1]
        assert gradient.numpy()[i] == pytest.approx((up - down) / 2e-5, rel=1e-4, abs=1e-4)


@pytest.mark.slow
def test_estimate_is_closer_to_the_truth_than_the_base_measure(bimodal):
    truth, data = bimodal
    fit = VariationalDensity(data, n_inducing=30, seed=0).fit(250)
    assert fit.elbo[-1] > fit.elbo[0] + 5 and not fit.stopped
    assert np.all(np.diff(fit.objective) >= -1e-9 * np.abs(fit.objective[1:]))
    grid, cell = truth.grid(300)
    estimate = fit.density_draws(grid, 200, np.random.default_rng(2)).mean(axis=0)
    assert np.sum(estimate) * cell == pytest.approx(1.0, abs=0.01)
    ours = distances(truth, estimate, grid, cell)["hellinger"]
    base = distances(truth, np.exp(GaussianBase.fit(data).logpdf(grid)), grid, cell)["hellinger"]
    assert ours < 0.6 * base, (ours, base)
    idata = to_inference_data(fit.inference_groups(grid[::30], n_draws=50))
    assert idata.posterior["density"].shape == (1, 50, 10)
    assert idata.posterior.attrs["exact"] == 0 or idata.posterior.attrs["exact"] is False


def test_bad_input_is_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="at least one observation"):
        VariationalDensity(np.empty((0, 1)))
    with pytest.raises(ValueError, match="NaN or infinite .*row 2"):
        VariationalDensity(np.array([0.1, 0.5, np.nan, 1.0]))
    with pytest.raises(ValueError, match="inducing"):
        VariationalDensity(rng.normal(size=50), n_inducing=1)
    with pytest.raises(ValueError, match="at least 2 points per axis"):
        VariationalDensity(rng.normal(size=50), quadrature=1)
    with pytest.raises(ValueError, match="4 dimensions: give quadrature"):
        VariationalDensity(rng.normal(size=(50, 4)))
    with pytest.raises(ValueError, match="mass_tolerance"):
        VariationalDensity(rng.normal(size=50), mass_tolerance=0)
    with pytest.raises(ValueError, match="2 dimensions"):
        VariationalDensity(rng.normal(size=(50, 1)), base=GaussianBase(np.zeros(2), np.eye(2)))


def test_grid_rule_integrates_against_the_normal():
    for dim, per_axis in [(1, 60), (2, 30), (3, 16)]:
        for offset in (0.0, 0.5):
            z, w = normal_grid(dim, per_axis, offset)
            assert w.sum() == pytest.approx(1.0) and z.shape == (per_axis**dim, dim)
            assert w @ z[:, 0] ** 2 == pytest.approx(1.0, abs=3e-5)  # 1.5e-5: the cut at 5 sd
            assert w @ np.exp(0.7 * z[:, -1]) == pytest.approx(np.exp(0.245), rel=1e-5)


def test_closed_form_factor_of_u_is_the_numerical_optimum():
    """q(u)'s closed form maximises the ELBO given q1 (optimal at the old q(u), q(lambda)): scipy agrees."""
    data = target("mixture_2d").sample(80, np.random.default_rng(1))
    method = VariationalDensity(data, n_inducing=6, quadrature=14, seed=0)
    theta = method._variables(*method.start)
    theta.assign(theta.numpy() + np.r_[0.3, -0.2, -0.1, 0, 0, 0, 0, 0, -0.7])
    rng = np.random.default_rng(2)
    size, n, mu0 = 6, len(data), float(theta.numpy()[-1])
    m0, root = 0.5 * rng.standard_normal(size), 0.3 * rng.standard_normal((size, size)) + np.eye(size)
    S0, alpha0 = root @ root.T, 200.0
    phi, prior_var = (t.numpy() for t in method._compiled()["features"](theta)[:2])
    g1, c = method._moments(phi, prior_var, mu0, m0, S0)
    omega = _polyagamma_mean(c)
    rho = np.exp(-g1[n:] / 2 - (c[n:] / 2 + np.logaddexp(0, -c[n:]) - np.log(2)) - np.log(2))
    intensity = np.exp(digamma(alpha0)) * rho * method.weights

    def elbo_in_u(values):
        m, half = values[:size], np.zeros((size, size))
        half[np.tril_indices(size)] = values[size:]
        S = half @ half.T
        g, c2 = method._moments(phi, prior_var, mu0, m, S)
        data_part = np.sum(g[:n] / 2 - omega[:n] * c2[:n] ** 2 / 2)
        events = np.sum(intensity * (-g[n:] / 2 - omega[n:] * c2[n:] ** 2 / 2))
        return -(data_part + events - 0.5 * (np.trace(S) + m @ m - size - np.linalg.slogdet(S)[1]))

    start = np.r_[m0, np.linalg.cholesky(S0)[np.tril_indices(size)]]
    options = {"maxiter": 5000, "ftol": 1e-14, "gtol": 1e-9}
    best = minimize(elbo_in_u, start, method="L-BFGS-B", options=options)
    m1, S1, alpha1 = method.update_q(theta, m0, S0, alpha0)
    closed = np.r_[m1, np.linalg.cholesky(S1)[np.tril_indices(size)]]
    assert elbo_in_u(closed) <= best.fun + 1e-8
    assert np.max(np.abs(best.x[:size] - m1)) < 1e-4
    # q(lambda)'s closed form is F's maximum over alpha given the new q(u)
    values = {a: method.bound(theta, m1, S1, a)[0] for a in (alpha1 * 0.99, alpha1, alpha1 * 1.01)}
    assert values[alpha1] > max(values[alpha1 * 0.99], values[alpha1 * 1.01])


@pytest.fixture(scope="module")
def mixture_2d():
    truth = target("mixture_2d")
    return truth, truth.sample(1000, np.random.default_rng(12))


def hellinger_and_mass(truth, fit, per_axis):
    grid, cell = truth.grid(per_axis)
    estimate = fit.density_draws(grid, 100, np.random.default_rng(2)).mean(axis=0)
    return distances(truth, estimate, grid, cell)["hellinger"], np.sum(estimate) * cell


@pytest.mark.slow
def test_objective_never_decreases_on_the_2d_mixture(mixture_2d):
    """Where the fit diverged (mean-field on the 2-D mixture, N >= 500): Adam's momentum stepped down the
    bound by up to 75 and, on a fixed importance sample, into hyperparameters that overfitted it."""
    truth, data = mixture_2d
    fit = VariationalDensity(data[:500], n_inducing=30, seed=12).fit(150)
    objective = np.array(fit.objective)
    assert len(objective) > 100 and not fit.stopped
    assert np.all(np.diff(objective) >= -1e-9 * np.abs(objective[1:])), np.diff(objective).min()
    assert abs(fit.mass - 1) < 0.005


@pytest.mark.slow
def test_2d_mixture_at_n_1000_is_close_to_the_truth(mixture_2d):
    truth, data = mixture_2d
    fit = VariationalDensity(data, n_inducing=30, quadrature=32, seed=12).fit(150)
    hellinger, mass = hellinger_and_mass(truth, fit, 40)
    base = distances(truth, np.exp(GaussianBase.fit(data).logpdf(truth.grid(40)[0])), *truth.grid(40))
    assert hellinger < 0.12 < 0.3 < base["hellinger"], (hellinger, base)
    assert abs(mass - 1) < 0.02 and abs(fit.mass - 1) < 0.02


@pytest.mark.slow
def test_3d_mixture_is_close_to_the_truth():
    truth = target("mixture_3d")
    data = truth.sample(1000, np.random.default_rng(13))
    fit = VariationalDensity(data, n_inducing=30, quadrature=14, seed=13).fit(120)
    hellinger, mass = hellinger_and_mass(truth, fit, 24)
    base = distances(truth, np.exp(GaussianBase.fit(data).logpdf(truth.grid(24)[0])), *truth.grid(24))
    assert hellinger < 0.16 < 0.3 < base["hellinger"], (hellinger, base)
    assert abs(mass - 1) < 0.02 and abs(fit.mass - 1) < 0.02


def test_a_grid_too_coarse_for_g_stops_the_fit_with_a_warning(bimodal):
    """Four grid points cannot resolve two bumps: the shifted grid's mass is far from 1."""
    _, data = bimodal
    with pytest.warns(VariationalWarning, match="mass by a shifted grid .* raise quadrature"):
        fit = VariationalDensity(data, n_inducing=10, quadrature=4, check_every=5, seed=0).fit(60)
    assert "mass" in fit.stopped and fit.iterations < 60 and len(fit.elbo) == fit.iterations


def test_a_broken_update_stops_the_fit_with_a_warning(bimodal):
    """An update that is not the coordinate optimum lowers the bound: the fit stops, naming it."""
    _, data = bimodal

    class Broken(VariationalDensity):
        calls = 0

        def update_q(self, theta, m, S, alpha):
            m, S, alpha = super().update_q(theta, m, S, alpha)
            self.calls += 1
            return m, S, 1.5 * alpha if self.calls > 3 else alpha  # q(lambda) off its optimum

    method = Broken(data, n_inducing=10, quadrature=60, update_hyperparameters=False, seed=0)
    with pytest.warns(VariationalWarning, match="bound fell"):
        fit = method.fit(30)
    assert "bound fell" in fit.stopped and fit.iterations <= 5
