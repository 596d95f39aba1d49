"""Tuning spaces: the unit cube, the candidate set, and the checks against a method's settings."""

import numpy as np
import pytest

from stanaccel.sampling.config import ConfigError, check_setting, keys
from stanaccel.tuning import Categorical, Integer, Real, Space

SPACE = Space(
    [
        Integer("n_steps", 1, 300),
        Real("step_size", 1e-3, 1.0, log=True),
        Categorical("gamma", [round(0.2 * k, 1) for k in range(11)]),
    ]
)


def test_unit_cube_round_trip():
    settings = [
        {"n_steps": 1, "step_size": 1e-3, "gamma": 0.0},
        {"n_steps": 300, "step_size": 1.0, "gamma": 2.0},
    ]
    unit = SPACE.to_unit(settings)
    assert unit.shape == (2, 3)
    np.testing.assert_allclose(unit, [[0, 0, 0], [1, 1, 1]], atol=1e-12)
    middle = SPACE.to_unit([{"n_steps": 150, "step_size": np.sqrt(1e-3), "gamma": 1.0}])[0]
    np.testing.assert_allclose(middle[1:], [0.5, 0.5])  # log scale; numeric choices at their values
    back = SPACE.from_unit(unit)
    assert back[0]["n_steps"] == 1 and back[1]["gamma"] == 2.0
    assert back[1]["step_size"] == pytest.approx(1.0) and isinstance(back[0]["n_steps"], int)


def test_text_choices_sit_at_their_index():
    space = Space([Categorical("inner", ["mh", "hmc", "pcn"])])
    np.testing.assert_allclose(space.to_unit([{"inner": "hmc"}]), [[0.5]])
    assert space.from_unit(np.array([[0.9]])) == [{"inner": "pcn"}]


def test_candidates_hold_every_discrete_value_and_fit_the_limit():
    candidates = SPACE.candidates(n_continuous=1024, seed=1)
    assert len(candidates) <= 20000 and np.all((candidates >= 0) & (candidates <= 1))
    settings = SPACE.from_unit(candidates)
    assert {s["n_steps"] for s in settings} == set(range(1, 301))
    assert {s["gamma"] for s in settings} == {round(0.2 * k, 1) for k in range(11)}
    small = Space([Integer("n", 1, 4), Real("x", 0, 1)]).candidates(n_continuous=8, seed=0)
    assert small.shape == (32, 2)  # the full product when it fits
    np.testing.assert_array_equal(small, Space([Integer("n", 1, 4), Real("x", 0, 1)]).candidates(8, seed=0))
    wide = Space([Integer("a", 0, 999), Integer("b", 0, 999)]).candidates()
    assert len(wide) <= 20000  # the integers thinned evenly


def test_random_settings_are_inside_the_space():
    settings = SPACE.random(200, np.random.default_rng(0))
    assert all(1 <= s["n_steps"] <= 300 and 1e-3 <= s["step_size"] <= 1 for s in settings)
    assert np.median([s["step_size"] for s in settings]) < 0.1  # uniform on the log scale


def test_from_dict():
    space = Space.from_dict(
        {
            "walk_length": {"int": [1, 300]},
            "step_size": {"log": [1e-3, 1.0]},
            "gamma": {"choices": [0.0, 0.2]},
            "x": {"real": [0, 1]},
        }
    )
    assert space.names == ["walk_length", "step_size", "gamma", "x"]
    assert space.dimensions[1].log and not space.dimensions[3].log
    with pytest.raises(ConfigError, match="space.step_size"):
        Space.from_dict({"step_size": {"log": [0.0, 1.0]}})
    with pytest.raises(ConfigError, match="space.x: expected one of"):
        Space.from_dict({"x": [0, 1]})
    with pytest.raises(ConfigError, match="space.x.*unknown form 'uniform'"):
        Space.from_dict({"x": {"uniform": [0, 1]}})


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: Integer("n", 5, 5), "n: empty range"),
        (lambda: Real("x", 1.0, 0.5), "x: empty range"),
        (lambda: Real("x", 0.0, 1.0, log=True), "x: a log scale needs a positive low bound"),
        (lambda: Integer("n", 1, 2.5), "n: integer bounds expected"),
        (lambda: Real("x", 0.0, float("inf")), "x: finite bounds expected"),
        (lambda: Categorical("c", []), "c: .*non-empty list of choices"),
        (lambda: Space([Real("x", 0, 1), Integer("x", 1, 3)]), "repeated: x"),
        (lambda: Space([]), "at least one dimension"),
    ],
)
def test_bad_spaces(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize(
    "dimension, method, message",
    [
        (
            Real("stepsize", 0.01, 1.0),
            "hmc",
            "'stepsize' is not a setting of method 'hmc'.*did you mean 'step_size'",
        ),
        (Integer("n_steps", 1, 50), "pcn", "'n_steps' is not a setting of method 'pcn'"),
        (Real("pcn_step", 0.1, 5.0), "pcn", "method 'pcn'.*pcn_step = 5.0: must be below 4"),
        (Real("step_size", 0.0, 1.0), "hmc", "method 'hmc'.*step_size = 0.0: must be above 0"),
        (Real("n_steps", 1, 10), "hmc", "n_steps = 1.0: expected an integer"),
        (Categorical("inner", ["mh", "nuts"]), "pt", "inner = 'nuts': expected one of"),
    ],
)
def test_check_against_a_method(dimension, method, message):
    with pytest.raises(ConfigError, match=message):
        Space([dimension]).check(method, keys=keys, check_setting=check_setting)


def test_check_accepts_a_method_s_settings():
    space = Space([Integer("n_steps", 1, 50), Real("step_size", 1e-3, 1.0, log=True)])
    assert space.check("hmc", keys=keys, check_setting=check_setting) is space and space.check() is space
    with pytest.raises(ConfigError, match="unknown method"):
        space.check("hcm", keys=keys, check_setting=check_setting)


def test_contains_says_whether_settings_are_points_of_the_space():
    space = Space([Integer("n", 1, 5), Real("x", 0.1, 1.0, log=True), Categorical("k", ["a", "b"])])
    assert space.contains({"n": 3, "x": 0.5, "k": "a", "other": 1})
    assert space.contains({"n": np.int64(5), "x": np.float64(0.1), "k": "b"})
    for outside in ({"n": 6}, {"n": 2.5}, {"x": 2.0}, {"x": "big"}, {"k": "c"}):
        assert not space.contains({"n": 3, "x": 0.5, "k": "a", **outside}), outside
    assert not space.contains({"n": 3, "x": 0.5})
