"""The randomised policy over settings and the mixture kernel it defines."""

import numpy as np
import pytest

from stanaccel.kernels import HMC, Mixture, RandomWalkMetropolis
from stanaccel.tuning import Categorical, Integer, RandomisedPolicy, Space, bayesian_optimisation
from stanaccel.tuning.policy import policy_probabilities
from tests.kernels.models import mvn_density, mvn_problem

SPACE = Space([Categorical("scale", [0.1, 0.3, 1.0])])


def objective(settings, rng):
    return {0.1: 0.5, 0.3: 0.8, 1.0: 0.6}[settings["scale"]] + 0.01 * rng.standard_normal()


@pytest.fixture(scope="module")
def result():
    return bayesian_optimisation(objective, SPACE, budget=8, seed=0)


def test_probabilities_follow_the_predicted_objective(result):
    mean = result.model.predict(result.candidates)
    by_hand = np.exp(100 * mean / 10) / np.exp(100 * mean / 10).sum()
    np.testing.assert_allclose(policy_probabilities(mean, temperature=10.0, scale=100.0), by_hand)
    np.testing.assert_allclose(
        policy_probabilities([0.0, np.log(3.0)], temperature=1.0, scale=1.0), [0.25, 0.75]
    )

    policy = RandomisedPolicy.from_result(result, size=20000, seed=1)
    weights = dict(zip([s["scale"] for s in policy.settings], policy.weights, strict=True))
    expected = dict(zip([s["scale"] for s in SPACE.from_unit(result.candidates)], by_hand, strict=True))
    for scale, weight in weights.items():
        assert weight == pytest.approx(expected[scale], abs=0.02)
    assert policy.settings[0] == {"scale": 0.3}  # the best setting has the largest weight


def test_draws_are_reproducible_and_weights_sum_to_one(result):
    one = RandomisedPolicy.from_result(result, temperature=0.5, size=1000, seed=7)
    two = RandomisedPolicy.from_result(result, temperature=0.5, size=1000, seed=7)
    assert one.settings == two.settings and np.array_equal(one.weights, two.weights)
    assert one.weights.sum() == pytest.approx(1.0) and np.all(np.diff(one.weights) <= 0)
    rows = one.table()
    assert set(rows[0]) == {"scale", "weight", "predicted"} and rows[0]["weight"] == one.weights[0]


def test_a_cold_policy_picks_the_best_and_a_hot_one_spreads():
    space = Space([Integer("n", 1, 5)])
    tuned = bayesian_optimisation(
        lambda s, rng: -abs(s["n"] - 3) + 0.01 * rng.standard_normal(), space, budget=8
    )
    cold = RandomisedPolicy.from_result(tuned, temperature=0.01)
    hot = RandomisedPolicy.from_result(tuned, temperature=1e4)
    assert cold.settings == [{"n": 3}]
    assert len(hot.settings) == 5


def test_mixture_of_the_policy_settings_is_exact_and_fixed():
    data, mean, _ = mvn_problem(N=30, D=2, seed=5)
    density = mvn_density(data)
    policy = RandomisedPolicy.uniform([{"scale": 0.1}, {"scale": 0.3}])
    kernel = policy.mixture(lambda s: RandomWalkMetropolis(density, scale=s["scale"]))
    assert isinstance(kernel, Mixture) and kernel.exact
    np.testing.assert_allclose(kernel.weights, [0.5, 0.5])
    assert [k.scale for k in kernel.kernels] == [0.1, 0.3]

    rng = np.random.default_rng(0)
    state = kernel.init(mean)
    chosen = []
    for _ in range(2000):
        state, info = kernel.step(state, rng)
        chosen.append(info.details["component"])
    assert np.mean(chosen) == pytest.approx(0.5, abs=0.05)
    np.testing.assert_allclose(kernel.weights, [0.5, 0.5])  # the mixture does not adapt


def test_random_search_has_no_policy():
    from stanaccel.tuning import random_search

    searched = random_search(objective, SPACE, budget=3)
    with pytest.raises(ValueError, match="needs the Gaussian process"):
        RandomisedPolicy.from_result(searched)


@pytest.mark.parametrize(
    "weights, message",
    [
        ([], "at least one kernel"),
        ([1.0], "one weight per kernel"),
        ([1.0, -1.0], "non-negative"),
        ([0.0, 0.0], "not all zero"),
        ([1.0, np.nan], "finite"),
    ],
)
def test_mixture_rejects_bad_weights(weights, message):
    density = mvn_density(mvn_problem(N=30, D=2, seed=5)[0])
    kernels = [] if not weights else [RandomWalkMetropolis(density), HMC(density, step_size=0.1, n_steps=2)]
    with pytest.raises(ValueError, match=message):
        Mixture(kernels, weights)
