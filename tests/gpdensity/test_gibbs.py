"""The GP density model's Gibbs sampler: each conditional checked on its own, then the estimate.

No Stan here: the sampler is NumPy and the polyagamma package.
"""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import expit
from scipy.stats import kstest, norm

from stanaccel.diagnostics import to_inference_data
from stanaccel.gpdensity import GaussianBase, GibbsSampler, SquaredExponential
from stanaccel.gpdensity.gibbs import (
    gaussian_conditional,
    inference_groups,
    sample_data_marks,
    sample_events,
    sample_mu0,
)


def test_gaussian_conditional_matches_brute_force_linear_algebra():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(12, 2))
    K = SquaredExponential(1.3, [0.8, 1.5])(points)
    omega = rng.gamma(1.0, 0.2, size=12)
    omega[3] = 1e-9  # a tiny Polya-Gamma draw must not break it
    u = np.where(np.arange(12) < 7, 0.5, -0.5)
    conditional = gaussian_conditional(K, omega, u, mu0=-0.4)
    sigma = np.linalg.inv(np.diag(omega) + np.linalg.inv(K))
    np.testing.assert_allclose(conditional.covariance(), sigma, atol=1e-8)
    draws = np.array([conditional.draw(rng) for _ in range(20000)])
    np.testing.assert_allclose(np.cov(draws, rowvar=False), sigma, atol=0.06 * np.max(np.diag(sigma)))
    np.testing.assert_allclose(
        conditional.mean, sigma @ (u + np.linalg.solve(K, np.full(12, -0.4))), atol=1e-8
    )


def test_thinning_keeps_the_intended_intensity():
    rng = np.random.default_rng(1)
    base = GaussianBase(np.zeros(1), np.eye(1))
    rate = 300.0

    def g_at(x):
        return 1.5 * x[:, 0]

    kept_fraction = quad(lambda x: norm.pdf(x) * expit(-1.5 * x), -10, 10)[0]
    counts, kept = [], []
    for _ in range(400):
        events, g, marks, _ = sample_events(rate, base, g_at, rng)
        counts.append(len(events))
        kept.append(events[:, 0])
        np.testing.assert_allclose(g, 1.5 * events[:, 0])
        assert np.all(marks > 0)
    counts = np.array(counts)
    expected = rate * kept_fraction  # a Poisson count: mean and variance both equal this
    assert abs(counts.mean() - expected) < 4 * np.sqrt(expected / len(counts))
    assert abs(counts.var() / expected - 1) < 0.25

    def cdf(x):
        return np.array([quad(lambda t: norm.pdf(t) * expit(-1.5 * t), -10, v)[0] for v in np.atleast_1d(x)])

    positions = np.concatenate(kept)[:3000]
    assert kstest(positions, lambda x: cdf(x) / kept_fraction).pvalue > 1e-3


def test_polyagamma_marks_have_the_tilted_mean():
    rng = np.random.default_rng(2)
    c = np.repeat([0.3, 1.0, 3.0], 20000)
    draws = sample_data_marks(c, rng).reshape(3, -1)
    for tilt, row in zip([0.3, 1.0, 3.0], draws, strict=True):
        mean = np.tanh(tilt / 2) / (2 * tilt)
        assert abs(row.mean() - mean) < 4 * row.std() / np.sqrt(len(row))


def test_mu0_conditional_matches_a_grid_posterior():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(8, 1))
    K = SquaredExponential(1.0, [1.0])(points)
    g = rng.normal(-1.0, 1.0, size=8)
    prior = (0.5, 2.0)
    grid = np.linspace(-8, 6, 20001)
    Kinv = np.linalg.inv(K)
    log_post = np.array([-0.5 * (g - m) @ Kinv @ (g - m) for m in grid]) - 0.5 * ((grid - 0.5) / 2.0) ** 2
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    mean, var = weights @ grid, weights @ grid**2 - (weights @ grid) ** 2
    draws = np.array([sample_mu0(np.linalg.cholesky(K), g, rng, prior) for _ in range(20000)])
    assert abs(draws.mean() - mean) < 4 * np.sqrt(var / len(draws))
    assert abs(draws.var() / var - 1) < 0.05


def test_density_estimate_beats_the_base_measure():
    rng = np.random.default_rng(4)
    data = np.concatenate([rng.normal(-1.5, 0.4, 50), rng.normal(1.0, 0.6, 50)])
    grid = np.linspace(-4, 4, 81)
    dx = grid[1] - grid[0]
    truth = 0.5 * norm.pdf(grid, -1.5, 0.4) + 0.5 * norm.pdf(grid, 1.0, 0.6)
    sampler = GibbsSampler(data)
    out = sampler.run(80, warmup=120, seed=5, at=grid[:, None], n_normaliser=300)
    estimate = out["density"].mean(axis=0)

    def hellinger(p):
        return np.sqrt(0.5 * np.sum((np.sqrt(p) - np.sqrt(truth)) ** 2) * dx)

    base = norm.pdf(grid, data.mean(), data.std())
    assert hellinger(estimate) < 0.7 * hellinger(base), (hellinger(estimate), hellinger(base))
    assert abs(estimate.sum() * dx - 1) < 0.05
    assert out["n_events"].shape == (80,) and np.all(out["rate"] > 0)
    idata = to_inference_data(inference_groups([out]))
    assert idata.posterior["density"].shape == (1, 80, 81)
    assert idata.posterior["lambda"].shape == (1, 80) and idata.posterior.attrs["exact"]


@pytest.mark.parametrize(
    "data, message",
    [
        (np.empty((0, 1)), "at least one observation"),
        (np.array([0.1, np.nan, 0.3]), "row 1"),
        (np.array([[0.0, 1.0], [1.0, 0.0]]), "cannot fit"),
    ],
)
def test_bad_data_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        GibbsSampler(data)


def test_mismatched_base_measure_and_settings_are_refused():
    data = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="base measure has 1"):
        GibbsSampler(data, base=GaussianBase(np.zeros(1), np.eye(1)))
    with pytest.raises(ValueError, match="hyper_every"):
        GibbsSampler(data, hyper_every=0)
    with pytest.raises(ValueError, match="positive"):
        SquaredExponential(-1.0, [1.0])
