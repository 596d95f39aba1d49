"""The GP density model's variational algorithm: the bound, the closed-form factors, the estimate.

Real TensorFlow (the bound's gradient) and scikit-learn (k-means for the inducing points); no Stan.
"""

import numpy as np
import pytest
from scipy.special import digamma

from stanaccel.diagnostics import to_inference_data
from stanaccel.gpdensity import GaussianBase, VariationalDensity
from stanaccel.gpdensity.synthetic import distances, target
from stanaccel.gpdensity.variational import _tensor, solve_alpha


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


def test_closed_form_updates_never_decrease_the_bound(bimodal):
    _, data = bimodal
    for seed, n_inducing in [(0, 20), (1, 40)]:
        *_, bounds = closed_form_run(data, 25, n_inducing=n_inducing, n_importance=500, seed=seed)
        assert np.all(np.diff(bounds) >= -1e-9 * np.abs(bounds[1:])), np.diff(bounds)
        assert bounds[-1] > bounds[0] + 1.0


def test_converged_factors_maximise_the_bound(bimodal):
    """At the fixed point of the updates, any small change of q(u) or q(lambda) lowers the bound:
    the closed forms and the bound agree."""
    _, data = bimodal
    method, theta, (m, S, alpha), bounds = closed_form_run(data, 400, n_inducing=12, n_importance=400)
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
    method = VariationalDensity(data[:60], n_inducing=8, n_importance=200, seed=3)
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


def test_estimate_is_closer_to_the_truth_than_the_base_measure(bimodal):
    truth, data = bimodal
    fit = VariationalDensity(data, n_inducing=30, n_importance=1000, seed=0).fit(250)
    # the bound rises overall; Adam's steps may dip it by a little
    assert fit.elbo[-1] > fit.elbo[0] + 5
    assert np.min(np.diff(fit.elbo)) > -0.05
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
    with pytest.raises(ValueError, match="n_importance"):
        VariationalDensity(rng.normal(size=50), n_importance=0)
    with pytest.raises(ValueError, match="2 dimensions"):
        VariationalDensity(rng.normal(size=(50, 1)), base=GaussianBase(np.zeros(2), np.eye(2)))
