"""Bayesian optimisation finds the peak of a noisy function more often than random search."""

import numpy as np
import pytest

from stanaccel.tuning import Categorical, Integer, Real, Space, bayesian_optimisation, random_search

SPACE = Space([Integer("n", 1, 50), Real("x", 0.0, 1.0)])
PEAK = {"n": 30, "x": 0.3}
SEEDS = range(8)


def peak_height(settings: dict) -> float:
    """A single smooth peak of height 1 at PEAK."""
    return float(np.exp(-0.5 * ((settings["n"] - 30) / 10) ** 2 - 0.5 * ((settings["x"] - 0.3) / 0.15) ** 2))


def noisy_peak(settings: dict, rng: np.random.Generator) -> float:
    return peak_height(settings) + 0.1 * rng.standard_normal()


def near_peak(settings: dict) -> bool:
    return abs(settings["n"] - PEAK["n"]) <= 5 and abs(settings["x"] - PEAK["x"]) <= 0.075


@pytest.fixture(scope="module")
def runs():
    tuned = [bayesian_optimisation(noisy_peak, SPACE, budget=20, seed=s, n_continuous=64) for s in SEEDS]
    searched = [random_search(noisy_peak, SPACE, budget=20, seed=s) for s in SEEDS]
    return tuned, searched


@pytest.mark.slow
def test_bayesian_optimisation_finds_the_peak_more_often_than_random_search(runs):
    tuned, searched = runs
    found = sum(near_peak(r.best) for r in tuned)
    found_at_random = sum(near_peak(r.best) for r in searched)
    assert found > found_at_random, (found, found_at_random)
    assert found >= 6, found


@pytest.mark.slow
def test_result_records_every_trial(runs):
    result = runs[0][0]
    assert len(result.trials) == 20 and result.method == "bayesian optimisation"
    assert all(t.seconds >= 0 and set(t.settings) == {"n", "x"} for t in result.trials)
    assert len(result.overhead) == 20 - 5  # the default initial design: max(3, min(10, 20 // 4))
    assert result.best in [t.settings for t in result.trials]
    mean, sd = result.predict([result.best])
    assert mean[0] == pytest.approx(result.best_value) and sd[0] >= 0
    rows = result.table()
    assert [row["trial"] for row in rows] == list(range(1, 21)) and "predicted" in rows[0]


@pytest.mark.slow
def test_random_search_keeps_the_highest_value(runs):
    result = runs[1][0]
    assert result.best_value == max(t.value for t in result.trials)
    assert result.predict([result.best]) is None and "predicted" not in result.table()[0]


def test_same_seed_same_run_and_nothing_passed_in_changes():
    space = Space([Categorical("kind", ["a", "b", "c"]), Real("x", 0.0, 1.0)])
    dims = list(space.dimensions)
    seen = []

    def objective(settings, rng):
        seen.append(settings)
        settings["x"] = -1.0  # the tuner hands out copies
        return (settings["kind"] == "b") - abs(settings["x"] + 1.3) + 0.01 * rng.standard_normal(), {"k": 1}

    one = bayesian_optimisation(objective, space, budget=6, seed=3, n_continuous=32)
    two = bayesian_optimisation(objective, space, budget=6, seed=3, n_continuous=32)
    assert [t.settings for t in one.trials] == [t.settings for t in two.trials]
    assert [t.value for t in one.trials] == [t.value for t in two.trials]
    assert all(0 <= t.settings["x"] <= 1 and t.details == {"k": 1} for t in one.trials)
    assert space.dimensions == dims


def test_a_non_finite_value_fails_the_trial_and_every_trial_failing_is_an_error():
    with pytest.raises(ValueError, match="every one of the 4 trials failed; the first: .*nan, not a finite"):
        bayesian_optimisation(lambda s, rng: float("nan"), SPACE, budget=4, seed=0)


def test_a_failing_trial_scores_worst_and_the_search_goes_on():
    def objective(settings, rng):
        if settings["x"] > 0.5:
            raise ValueError(f"x = {settings['x']:.2f} is impossible\nsecond line")
        return noisy_peak(settings, rng)

    result = bayesian_optimisation(objective, SPACE, budget=12, seed=1, n_continuous=64)
    assert len(result.trials) == 12
    failed = [t for t in result.trials if not t.ok]
    assert failed and result.failures == len(failed)
    assert all(t.value == -np.inf and t.failed.startswith("ValueError: x = ") for t in failed)
    assert all("second line" not in t.failed for t in failed)
    assert result.best["x"] <= 0.5 and np.isfinite(result.best_value)
    rows = result.table()
    assert {row["failed"] is None for row in rows} == {True, False}
    assert all((row["value"] is None) == (row["failed"] is not None) for row in rows)


def test_no_setting_is_measured_twice_and_a_measured_space_ends_the_search():
    space = Space([Integer("n", 1, 6)])
    result = bayesian_optimisation(lambda s, rng: -abs(s["n"] - 6.0), space, budget=10, seed=0)
    assert sorted(t.settings["n"] for t in result.trials) == [1, 2, 3, 4, 5, 6]
    assert result.distinct == 6 and result.best == {"n": 6}


def test_observed_trials_are_fitted_first_and_never_proposed_again():
    from stanaccel.tuning import Trial

    given = [Trial({"n": 30, "x": 0.3}, 1.0, 0.0, role="default")]
    result = bayesian_optimisation(noisy_peak, SPACE, budget=6, seed=2, n_continuous=64, observed=given)
    assert len(result.trials) == 7 and result.trials[0].role == "default"
    assert all(t.role == "search" for t in result.trials[1:])
    assert all(t.settings != given[0].settings for t in result.trials[1:])
    assert result.table()[0]["role"] == "default" and result.distinct == 7
