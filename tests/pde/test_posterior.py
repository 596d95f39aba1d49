"""The benchmark posterior: data, prior, the density interface, MAP, Gauss-Newton Hessian, pCN on it."""

import numpy as np
import pytest

from stanaccel.densities import evaluations
from stanaccel.kernels import PCN
from stanaccel.pde import (
    SENSORS,
    BiLaplacianPrior,
    ExponentialPrior,
    benchmark_solver,
    elliptic_posterior,
    find_map,
    gauss_newton_hessian,
    noise_sd,
    true_log_transmissivity,
)


@pytest.fixture(scope="module")
def posterior():
    """An informative posterior (noise from the observations' scale) on a small mesh."""
    return elliptic_posterior(n=10, degree=1, regime="observations", seed=3)


@pytest.fixture(scope="module")
def map_estimate(posterior):
    return find_map(posterior)


def test_truth_is_minus_one_on_the_rectangle_and_the_ring_and_zero_elsewhere():
    x = np.array([0.7, 0.25, 0.8, 0.5, 0.1, 0.9])
    y = np.array([0.3, 0.25, 0.75, 0.5, 0.9, 0.1])  # rectangle, ring (both ends), centre, corners
    assert np.array_equal(true_log_transmissivity(x, y), [-1, -1, -1, 0, 0, 0])


def test_sensors_are_the_five_by_five_grid():
    assert SENSORS.shape == (25, 2)
    assert np.allclose(np.unique(SENSORS[:, 0]), [0.2, 0.3, 0.4, 0.5, 0.6])


def test_noise_regimes():
    rng = np.random.default_rng(0)
    noise_free = np.array([0.05, -0.2, 0.1])
    prior = ExponentialPrior(benchmark_solver(6, 1).nodes)
    assert noise_sd("truth", noise_free) == pytest.approx(0.1)
    assert noise_sd("observations", noise_free) == pytest.approx(0.02)
    assert 0.1 < noise_sd("prior", noise_free, prior, rng) < 0.5  # E max u over 49 nodes, sigma 1.25
    with pytest.raises(ValueError, match="noise regime"):
        noise_sd("max", noise_free)
    with pytest.raises(ValueError, match="prior"):
        noise_sd("prior", noise_free)


def test_data_come_from_the_fine_mesh_and_the_seed(posterior):
    again = elliptic_posterior(n=10, degree=1, regime="observations", seed=3)
    assert np.array_equal(again.data, posterior.data)
    coarse = posterior.solver.observe(true_log_transmissivity(*posterior.solver.nodes))
    assert not np.allclose(coarse, posterior.observed.noise_free, rtol=0, atol=1e-12)  # a 20x20 solve
    assert posterior.noise_sd == pytest.approx(np.abs(posterior.observed.noise_free).max() / 10)


def test_prior_is_whitened():
    nodes = benchmark_solver(4, 1).nodes
    prior = ExponentialPrior(nodes)
    distance = np.linalg.norm(nodes[:, 0] - nodes[:, 7])
    covariance = prior.cholesky @ prior.cholesky.T
    assert covariance[0, 7] == pytest.approx(1.25**2 * np.exp(-distance / (2 * 0.0625)))
    assert np.allclose(prior.field(np.zeros(prior.dim)), 0.0)


def test_density_interface_counts_and_gradient(posterior):
    xi = 0.3 * np.random.default_rng(1).standard_normal(posterior.dim)
    before = (posterior.n_log_density, posterior.n_gradient)
    lp = posterior.log_density(xi)
    lp2, gradient = posterior.log_density_gradient(xi)
    assert (posterior.n_log_density, posterior.n_gradient) == (before[0] + 1, before[1] + 1)
    assert lp == pytest.approx(lp2)
    direction, h = np.random.default_rng(2).standard_normal(posterior.dim), 1e-6
    difference = (posterior.log_density(xi + h * direction) - posterior.log_density(xi - h * direction)) / (
        2 * h
    )
    assert gradient @ direction == pytest.approx(difference, rel=1e-5)
    likelihood = posterior.likelihood.log_density(xi)
    assert likelihood == pytest.approx(lp + 0.5 * xi @ xi)
    assert posterior.likelihood.n_log_density == 1


def test_wrong_length_is_a_clear_error(posterior):
    with pytest.raises(ValueError, match=f"length {posterior.dim}"):
        posterior.log_density(np.zeros(posterior.dim + 1))


def test_map_improves_on_the_prior_mean_with_a_near_zero_gradient(posterior, map_estimate):
    assert map_estimate.log_density > posterior.log_density(np.zeros(posterior.dim)) + 1
    assert np.abs(map_estimate.gradient).max() < 1e-3
    assert np.allclose(map_estimate.field, posterior.field(map_estimate.xi))


def test_gauss_newton_hessian_has_at_most_25_non_negative_eigenvalues(posterior, map_estimate):
    hessian = gauss_newton_hessian(posterior, map_estimate.xi)
    assert hessian.eigenvalues.shape == (25,)
    assert np.all(hessian.eigenvalues >= 0)
    assert hessian.eigenvalues[0] > 1.0  # the data inform some directions
    full = np.linalg.eigvalsh(hessian.matrix())
    assert np.all(full > -1e-8 * full.max())
    assert np.sum(full > 1e-8 * full.max()) <= 25
    assert np.allclose(hessian.matrix(), hessian.jacobian.T @ hessian.jacobian / posterior.noise_sd**2)


def test_pcn_runs_on_the_20x20_posterior_and_accepts_moves():
    posterior = elliptic_posterior(n=20, degree=1, regime="truth", seed=0)
    kernel = PCN(posterior.likelihood, np.zeros(posterior.dim), np.eye(posterior.dim), step=0.05)
    rng = np.random.default_rng(4)
    state = kernel.init(np.zeros(posterior.dim))
    accepted = 0
    for _ in range(100):
        state, info = kernel.step(state, rng)
        accepted += info.accepted
    assert 0 < accepted < 100
    assert evaluations(posterior.likelihood) == 101
    assert np.isfinite(state.log_density)


def test_bilaplacian_prior_is_sparse_whitening_with_the_benchmark_scale():
    solver = benchmark_solver(20, 1)
    prior = BiLaplacianPrior(solver.basis)
    cholesky = prior.field(np.eye(prior.dim)).T  # L's columns
    rng = np.random.default_rng(5)
    xi, g = rng.standard_normal(prior.dim), rng.standard_normal(prior.dim)
    assert (prior.field(xi) - prior.mean) @ g == pytest.approx(xi @ prior.pullback(g))  # pullback is L^T
    x, y = solver.nodes
    centre = np.argmin((x - 0.5) ** 2 + (y - 0.5) ** 2)
    assert 0.8 * 1.25 < np.linalg.norm(cholesky[centre]) < 1.3 * 1.25  # marginal sd in the interior


def test_robin_term_keeps_the_bilaplacian_sd_near_the_boundary():
    solver = benchmark_solver(20, 1)
    x, y = solver.nodes
    nodes = [np.argmin((x - a) ** 2 + (y - b) ** 2) for a, b in ((0.5, 0.5), (0.5, 0.0), (0.0, 0.0))]
    sds = {}
    for robin in (True, False):
        columns = BiLaplacianPrior(solver.basis, robin=robin).field(np.eye(solver.dim)).T
        sds[robin] = np.linalg.norm(columns[nodes], axis=1)  # centre, edge, corner
    centre, edge, corner = sds[True]
    assert edge < 1.1 * centre and corner < 1.3 * centre  # measured 1.0 and 1.2
    assert sds[False][1] > 1.3 * centre and sds[False][2] > 2 * centre  # without it: 1.4 and 2.1


def test_posterior_with_the_bilaplacian_prior_has_adjoint_gradients():
    posterior = elliptic_posterior(n=10, degree=2, regime="observations", seed=1, prior="bilaplacian")
    xi = 0.5 * np.random.default_rng(6).standard_normal(posterior.dim)
    _, gradient = posterior.log_density_gradient(xi)
    direction, h = np.random.default_rng(7).standard_normal(posterior.dim), 1e-6
    difference = (posterior.log_density(xi + h * direction) - posterior.log_density(xi - h * direction)) / (
        2 * h
    )
    assert gradient @ direction == pytest.approx(difference, rel=1e-5)
    with pytest.raises(ValueError, match="prior must be"):
        elliptic_posterior(n=10, prior="matern")
