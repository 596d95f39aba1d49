"""The Gibbs sampler's normaliser move leaves the posterior invariant: a Geweke-style check on exact draws.

Exact draws of the whole model (lambda, mu0, g and the unthinned Poisson process, each point kept as a
datum with probability sigma(g), else a latent event) are exact draws of the posterior given the data
they made; a move that conditions on the data and leaves every posterior invariant leaves this joint
distribution unchanged. So each statistic's change over a few moves has mean zero, which the iid pairs
check within their standard error; a move with a wrong acceptance ratio shifts it.
"""

import numpy as np
import pytest
from scipy.special import expit
from threadpoolctl import threadpool_limits

from stanaccel.gpdensity import GaussianBase, GibbsSampler, SquaredExponential
from stanaccel.gpdensity.gibbs import GibbsState
from stanaccel.gpdensity.normaliser import NormaliserMove

RATE_PRIOR = (5.0, 0.25)  # lambda ~ Gamma(5, 1/4): about 20 points, 10 of them data
MU0_PRIOR = (0.0, 1.0)
KERNEL = SquaredExponential(1.0, [1.0])
BASE = GaussianBase(np.zeros(1), np.eye(1))


def joint_draw(rng):
    rate, mu0 = rng.gamma(RATE_PRIOR[0], 1 / RATE_PRIOR[1]), rng.normal(*MU0_PRIOR)
    x = BASE.sample(rng.poisson(rate), rng)
    g = mu0 + np.linalg.cholesky(KERNEL(x)) @ rng.standard_normal(len(x))
    kept = rng.random(len(x)) < expit(g)
    data = x[kept]
    chol = np.linalg.cholesky(KERNEL(np.vstack([data, x[~kept]])))
    state = GibbsState(x[~kept], g[kept], g[~kept], np.empty(0), np.empty(0), rate, mu0, KERNEL, BASE, chol)
    return data, state


def statistics(state):
    return [np.log(state.rate), state.mu0, len(state.events), np.sum(expit(state.g_events))]


def z_scores(move, draws=1000, moves=3, step=0.5, exponent=0.6, seed=0):
    """The mean change of each statistic over ``moves`` moves from exact draws, in standard errors."""
    rng = np.random.default_rng(seed)
    changes, accepted = [], []
    with threadpool_limits(1, "blas"):
        for _ in range(draws):
            data, state = joint_draw(rng)
            before = statistics(state)
            for _ in range(moves):
                state, moved = move(state, data, step, exponent, rng)
                accepted.append(moved)
            changes.append(np.subtract(statistics(state), before))
    changes = np.array(changes)
    return changes.mean(axis=0) / (changes.std(axis=0) / np.sqrt(draws)), np.mean(accepted)


class WithoutRemovedFactor(NormaliserMove):
    """Broken: the thinned events' factor of the acceptance ratio left out (a wrong proposal ratio)."""

    def log_ratio_thinning(self, rate, mu0, g_data, g_removed, shift, exponent):
        return super().log_ratio_thinning(rate, mu0, g_data, g_removed[:0], shift, exponent)


class WithoutJacobian(NormaliserMove):
    """Broken: the Jacobian theta of lambda -> theta lambda left out."""

    def log_ratio_thinning(self, rate, mu0, g_data, g_removed, shift, exponent):
        return super().log_ratio_thinning(rate, mu0, g_data, g_removed, shift, exponent) + exponent * shift


@pytest.mark.parametrize("exponent", [1.0, 0.5])
def test_move_keeps_the_joint_distribution(exponent):
    z, acceptance = z_scores(NormaliserMove(RATE_PRIOR, MU0_PRIOR), exponent=exponent)
    assert np.all(np.abs(z) < 4), z
    assert 0.2 < acceptance < 0.8  # it moves: the check has something to check


@pytest.mark.parametrize("broken", [WithoutRemovedFactor, WithoutJacobian])
def test_broken_move_is_caught(broken):
    z, _ = z_scores(broken(RATE_PRIOR, MU0_PRIOR))
    assert np.max(np.abs(z)) > 4, z


def test_sampler_makes_and_adapts_the_move():
    data = np.random.default_rng(0).normal(size=60)
    run = GibbsSampler(data, normaliser_every=1, normaliser_step=0.01).run(20, warmup=30, seed=1)
    assert 0 < run["acceptance"]["normaliser"] < 1 and run["normaliser_step"] > 0.01
    assert 0 < run["normaliser_exponent"] < 1
    state = run["state"]
    assert len(state.omega_events) == len(state.events) == len(state.g_events)
    points = np.vstack([data[:, None], state.events])
    np.testing.assert_allclose(state.chol @ state.chol.T, state.kernel(points), atol=1e-12)
    off = GibbsSampler(data).run(5, seed=1)  # off by default
    assert np.isnan(off["acceptance"]["normaliser"])
