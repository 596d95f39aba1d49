"""Funnels read from draws: centred (the spread grows with the scale), inverted (sizes fall as 1 / scale).

On fixed NumPy draws of known shape: a funnel of each kind is found with its
scale and the parameters it moves; Gaussians, however correlated, and a
banana are not funnels.
"""

import numpy as np
import pytest

from stanaccel.diagnostics.funnel import find_funnel

NAMES = ["tau"] + [f"theta[{i}]" for i in range(1, 9)]
N = 4000


def test_a_centred_funnel_is_found_with_its_scale_and_the_advice_to_non_centre():
    rng = np.random.default_rng(0)
    log_tau = rng.normal(0, 1, N)
    theta = 3 + rng.normal(size=(N, 8)) * np.exp(log_tau)[:, None]
    funnel = find_funnel(np.column_stack([log_tau, theta]).reshape(4, N // 4, 9), NAMES)
    assert funnel.scale == "tau" and funnel.coupled == NAMES[1:] and funnel.centred
    assert funnel.correlation == pytest.approx(1 / np.sqrt(1 + np.pi**2 / 8), abs=0.03)
    assert "non-centred" in funnel.message() and funnel.to_dict()["centred"]


def test_an_inverted_funnel_is_found_with_the_advice_to_centre():
    rng = np.random.default_rng(1)
    log_tau = rng.normal(0, 0.5, N)
    pinned = np.linspace(-2, 2, 8) + rng.normal(0, 0.1, (N, 8))  # tau * z, pinned by the data
    draws = np.column_stack([log_tau, pinned / np.exp(log_tau)[:, None]])
    scales = np.arange(9) == 0  # tau is the log of a bounded scale, the others are not
    funnel = find_funnel(draws, NAMES, scales)
    assert funnel.scale == "tau" and not funnel.centred and funnel.correlation < -0.8
    assert len(funnel.coupled) >= 4  # those pinned away from 0
    assert "write those parameters centred" in funnel.message()
    unscaled = find_funnel(draws, NAMES, np.zeros(9, dtype=bool))  # no scale to be an inverted one's
    assert unscaled is None or unscaled.centred


def test_correlated_coordinates_far_from_0_are_an_inverted_funnel_only_of_a_scale():
    # log |x_k| is nearly linear in x_k far from 0, so two coordinates correlated with a third fall with it
    # on a slope near -1 (as the robust regression's alpha and z[4] did with z[12]): not a scale, no funnel
    rng = np.random.default_rng(4)
    cov = np.array([[1.0, -0.85, -0.85], [-0.85, 1.0, 0.7], [-0.85, 0.7, 1.0]])
    draws = rng.multivariate_normal([0.0, 1.2, 1.2], cov * 0.3**2, N)
    names = ["z[12]", "alpha", "z[4]"]
    assert find_funnel(draws, names) is not None  # every coordinate a candidate: the coincidence
    assert find_funnel(draws, names, np.zeros(3, dtype=bool)) is None


@pytest.mark.parametrize("rho", [0.0, 0.9, -0.1])
def test_gaussians_however_correlated_and_a_banana_are_not_funnels(rho):
    rng = np.random.default_rng(2)
    cov = rho * np.ones((9, 9)) + (1 - rho) * np.eye(9)
    assert find_funnel(rng.multivariate_normal(np.full(9, 5.0), cov, N), NAMES) is None
    a = rng.normal(size=N)
    banana = np.column_stack([a, rng.normal(size=N) + a**2, rng.normal(size=(N, 3))])
    assert find_funnel(banana, NAMES[:5]) is None


def test_a_weak_funnel_below_the_limit_and_too_few_draws_are_not_reported():
    rng = np.random.default_rng(3)
    log_tau = rng.normal(0, 0.1, N)  # tau known to 10%: correlation 0.09
    theta = rng.normal(size=(N, 8)) * np.exp(log_tau)[:, None]
    assert find_funnel(np.column_stack([log_tau, theta]), NAMES) is None
    assert find_funnel(np.zeros((10, 9)), NAMES) is None
