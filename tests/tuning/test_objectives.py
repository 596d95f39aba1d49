"""The tuning objectives on series with known autocorrelation."""

import numpy as np
import pytest

from stanaccel.tuning import autocorrelation_objective, ess_per_gradient, ess_per_second


def ar1(rho: float, chains: int, draws: int, seed: int) -> np.ndarray:
    """A stationary AR(1) series: autocorrelation rho ** lag."""
    rng = np.random.default_rng(seed)
    out = np.empty((chains, draws))
    out[:, 0] = rng.standard_normal(chains)
    noise = np.sqrt(1 - rho**2) * rng.standard_normal((chains, draws))
    for t in range(1, draws):
        out[:, t] = rho * out[:, t - 1] + noise[:, t]
    return out


def test_ar1_scores_one_minus_its_mean_absolute_autocorrelation():
    rho, max_lag = 0.9, 50
    expected = 1 - np.mean(rho ** np.arange(1, max_lag + 1))
    assert autocorrelation_objective(ar1(rho, 4, 20000, seed=1), max_lag) == pytest.approx(expected, abs=0.03)


def test_white_noise_scores_near_one_and_a_stuck_chain_zero():
    noise = np.random.default_rng(2).standard_normal(5000)
    assert autocorrelation_objective(noise) > 0.97
    assert autocorrelation_objective(np.full(500, 3.0)) == 0.0
    assert autocorrelation_objective(np.full((2, 500), 3.0)) == 0.0


def test_bad_series():
    with pytest.raises(ValueError, match="101 draws per chain; this objective needs at least 102"):
        autocorrelation_objective(np.zeros(101), max_lag=100)
    with pytest.raises(ValueError, match="non-finite"):
        autocorrelation_objective(np.r_[np.zeros(200), np.nan])


def test_ess_per_cost():
    series = ar1(0.5, 4, 2000, seed=3)
    per_second = ess_per_second(series, seconds=2.0)
    assert per_second == pytest.approx(2 * ess_per_gradient(series, gradients=4), rel=1e-12)
    # (1 - rho) / (1 + rho) = 1/3 of the 8000 draws, within Monte Carlo error
    assert 2000 < 2 * per_second < 3500
    assert ess_per_second(np.ones((2, 100)), 1.0) == 0.0
    with pytest.raises(ValueError, match="seconds must be positive"):
        ess_per_second(series, 0.0)
