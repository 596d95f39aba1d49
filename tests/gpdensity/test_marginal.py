"""g integrated out: the marginal of the pseudo-observations, mu0's and g's conditionals, and the
kernel update, checked against brute-force linear algebra and a grid posterior (with a broken control).
"""

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from stanaccel.diagnostics.metrics import mcse_mean
from stanaccel.gpdensity import SquaredExponential
from stanaccel.gpdensity.gibbs import sample_data_marks
from stanaccel.gpdensity.marginal import Marginal, PseudoObservations, adapted_step, update_kernel


def pseudo_observations(n: int = 12, n_data: int = 7, seed: int = 0, tiny: bool = True, level: float = -0.5):
    """Points and Polya-Gamma marks as the sampler meets them: g from the GP, omega ~ PG(1, g).
    ``tiny``: one mark 1e-9, which must not break the linear algebra."""
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 1))
    g = np.linalg.cholesky(SquaredExponential(1.0, [0.7])(points)) @ rng.standard_normal(n) + level
    omega = sample_data_marks(g, rng)
    if tiny:
        omega[3] = 1e-9
    return points, PseudoObservations.of(omega[:n_data], omega[n_data:]), rng


def test_marginal_matches_brute_force_linear_algebra():
    points, observations, rng = pseudo_observations()
    K = SquaredExponential(1.3, [0.8])(points)
    prior = (0.3, 2.0)
    marginal = Marginal(K, observations, prior)
    z, noise = observations.u / observations.omega, np.diag(1 / observations.omega)
    # g and mu0 integrated out: z ~ N(m, K + W^-1 + s^2 1 1^T)
    expected = multivariate_normal(np.full(len(z), prior[0]), K + noise + prior[1] ** 2).logpdf(z)
    assert marginal.log_marginal() == pytest.approx(expected, rel=1e-12)
    # mu0 | omega, events: prior times N(z | mu0 1, K + W^-1)
    P = np.linalg.inv(K + noise)
    precision = 1 / prior[1] ** 2 + P.sum()
    mean, sd = marginal.mu0_conditional()
    assert mean == pytest.approx((prior[0] / prior[1] ** 2 + (P @ z).sum()) / precision, rel=1e-9)
    assert sd == pytest.approx(1 / np.sqrt(precision), rel=1e-9)
    # g | mu0: N(Sigma (u + K^-1 mu0 1), Sigma), Sigma = (W + K^-1)^-1, the paper's form
    sigma = np.linalg.inv(np.diag(observations.omega) + np.linalg.inv(K))
    g_mean = sigma @ (observations.u + np.linalg.solve(K, np.full(len(z), -0.4)))
    mean_g, cov_g = marginal.g_conditional(-0.4)
    np.testing.assert_allclose(mean_g, g_mean, atol=1e-8)
    np.testing.assert_allclose(cov_g, sigma, atol=1e-8)
    draws = np.array([marginal.draw_g(-0.4, np.linalg.cholesky(K), rng) for _ in range(20000)])
    se = np.sqrt(np.diag(sigma) / len(draws))
    assert np.max(np.abs(draws.mean(axis=0) - g_mean) / se) < 4.5
    np.testing.assert_allclose(np.cov(draws, rowvar=False), sigma, atol=0.06 * np.max(np.diag(sigma)))


class Mu0Fixed(Marginal):
    """A deliberately broken marginal: mu0 held at its prior mean instead of integrated out."""

    def log_marginal(self) -> float:
        m = self.mu0_prior[0]
        quadratic = self.z_z - 2 * m * self.one_z + m**2 * self.one_one
        log_det = self.log_det_B - np.sum(np.log(self.root**2))
        return float(-0.5 * quadratic - 0.5 * log_det - 0.5 * len(self.root) * np.log(2 * np.pi))


def kernel_chain(marginal_class, iterations: int, seed: int):
    """update_kernel alone on fixed pseudo-observations: its chain over (log amplitude, log lengthscale)."""
    points, observations, _ = pseudo_observations(n=30, n_data=15, seed=seed, tiny=False, level=-2.5)
    prior_centre = np.log([1.0, 0.7])

    def log_prior(kernel):
        return float(-0.5 * np.sum((kernel.log_parameters() - prior_centre) ** 2))

    kernel = SquaredExponential(1.0, [0.7])
    marginal = marginal_class(kernel(points), observations, (0.0, 2.0))
    rng = np.random.default_rng(seed)
    trace, accepted = [], 0
    for _ in range(iterations):
        update = update_kernel(kernel, marginal, points, observations, log_prior, 1.2, rng)
        kernel, marginal, accepted = update.kernel, update.marginal, accepted + update.accepted
        trace.append(kernel.log_parameters())
    # the exact marginal posterior of (log amplitude, log lengthscale) on a grid
    axes = [np.linspace(c - 4.5, c + 4.5, 161) for c in prior_centre]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
    log_post = np.array([
        Marginal(SquaredExponential.from_log_parameters(t)(points), observations, (0.0, 2.0)).log_marginal()
        - 0.5 * np.sum((t - prior_centre) ** 2)
        for t in grid
    ])  # fmt: skip
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    return np.array(trace), accepted / iterations, weights @ grid


@pytest.mark.parametrize("marginal_class, correct", [(Marginal, True), (Mu0Fixed, False)])
@pytest.mark.slow
def test_kernel_update_keeps_the_marginal_posterior(marginal_class, correct):
    """The kernel update is exact: on fixed pseudo-observations its chain's means match the grid posterior
    within MCSE; a broken marginal (mu0 not integrated out) is caught."""
    trace, acceptance, truth = kernel_chain(marginal_class, 8000, seed=1)
    assert 0.1 < acceptance < 0.9
    z = [(trace[:, i].mean() - truth[i]) / mcse_mean(trace[None, :, i]) for i in range(2)]
    if correct:
        assert np.max(np.abs(z)) < 4, z
    else:
        assert np.max(np.abs(z)) > 4, z


def test_adapted_step_moves_toward_the_target_acceptance():
    assert adapted_step(0.1, True, 0) > 0.1 > adapted_step(0.1, False, 0)
    assert adapted_step(0.1, True, 100) / 0.1 < adapted_step(0.1, True, 0) / 0.1  # steps shrink with time
