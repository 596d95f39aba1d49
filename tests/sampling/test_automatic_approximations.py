"""The approximations built from the user's program alone (kinds laplace and control-variate) in a run.

Mistakes are refused before the warm-up; the set-up (mode, Hessian, Taylor
coefficients) is charged; dc over control variates agrees with Stan's NUTS.
"""

import json
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from stanaccel.approx import KeepConstants, ScaledSubset
from stanaccel.diagnostics import reference_z_scores
from stanaccel.observations import Observations
from stanaccel.programs import program_path
from stanaccel.sampling import ApproximationWarning, ConfigError, ProgramConventionError, make_config, sample
from stanaccel.sampling.config import Approximation
from stanaccel.sampling.program import scaled_subset
from stanaccel.stan import StanModel, write_data
from tests.sampling.programs import NO_BETA, REGRESSION, logistic_data, regression_data
from tests.sampling.test_sample import check_exact

OBSERVATIONS = {"count": "N", "fields": ["X", "y"]}
XY = {"count": "N", "fields": ["x", "y"]}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("automatic")
    for name, code in [("regression", REGRESSION), ("no_beta", NO_BETA)]:
        (folder / f"{name}.stan").write_text(code)
    write_data(folder / "regression.json", regression_data())
    return folder


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"kind": "laplace", "m": 10},
            r"approx.m = 10: kind 'laplace' \(the Gaussian at the mode\) takes no m",
        ),
        ({"kind": "control-variate"}, "approx.m = None: kind 'control-variate' needs a positive integer m"),
        ({"kind": "control-variate", "m": 5, "scale": False}, "always scales its subset by N/m"),
    ],
)
def test_malformed_automatic_approximations_are_refused(table, message):
    with pytest.raises(ConfigError, match=message):
        make_config("dc", {"approx": table})


def test_automatic_approximations_are_labelled():
    assert Approximation.parse({"kind": "laplace"}).label == "laplace"
    assert Approximation.parse({"kind": "control-variate", "m": 20}).label == "control-variate m=20"


def test_control_variates_without_observations_are_refused_before_compiling(files):
    with pytest.raises(ProgramConventionError, match="must know which data are per observation"):
        sample(files / "regression.stan", files / "regression.json", "dc",
               {"approx": {"kind": "control-variate", "m": 10}})  # fmt: skip


def test_control_variates_without_beta_scale_the_difference_of_two_subsets(files):
    # no_beta declares int<lower=2> N, so the base is the first 2 of the 10 observations drawn, and the
    # other 8 are scaled to the 28 left: log prior + l_S0 + (28/8) l_{S - S0}, which regression.stan
    # (the same model with beta) gives as log p(S0, beta=1) + log p(S - S0, beta=28/8) - log prior.
    data = regression_data(n=30, seed=7)
    config = make_config("dc", {"approx": {"kind": "control-variate", "m": 10}, "observations": XY})
    model = StanModel(files / "no_beta.stan", data)
    scaled = scaled_subset(config.approx, model, data, config, seed=3)
    assert isinstance(scaled, ScaledSubset) and scaled.weight == pytest.approx(28 / 8)

    def indices(instance):
        return {int(i) for i in np.flatnonzero(np.isin(data["x"], json.loads(instance.model.data_json)["x"]))}

    drawn, first = indices(scaled.subset), indices(scaled.base)
    assert len(drawn) == 10 and len(first) == 2 and first < drawn
    observations = Observations("N", ("x", "y"))
    beta = StanModel(files / "regression.stan", {**data, "beta": 1.0})

    def with_beta(indices, b):
        return KeepConstants(beta.with_data({**observations.take(data, sorted(indices)), "beta": b}))

    parts = [with_beta(first, 1.0), with_beta(drawn - first, 28 / 8), with_beta(drawn, 0.0)]
    for x in np.random.default_rng(1).normal(size=(5, 2)):
        value, gradient = scaled.log_density_gradient(x)
        pieces = [part.log_density_gradient(x) for part in parts]
        assert value == pytest.approx(pieces[0][0] + pieces[1][0] - pieces[2][0], rel=1e-12)
        assert gradient == pytest.approx(pieces[0][1] + pieces[1][1] - pieces[2][1], rel=1e-10)
        assert scaled.log_density(x) == pytest.approx(value, rel=1e-12)


def test_dc_over_control_variates_without_beta_samples_the_known_posterior(files):
    # A Gaussian posterior: the control variates make pi* = pi, so every mark move is accepted.
    data = regression_data()
    settings = {"approx": {"kind": "control-variate", "m": 10}, "observations": XY, "warmup": 200}
    result = sample(files / "no_beta.stan", data, "dc", settings, seed=4, progress=False)
    assert result.reports["approximations"][0]["log_ratio_sd"] < 1e-4
    check_exact(result, data)


def test_control_variates_on_as_many_observations_as_the_data_are_refused(files):
    settings = {
        "approx": {"kind": "control-variate", "m": 40},
        "observations": {"count": "N", "fields": ["x", "y"]},
    }
    with pytest.raises(ConfigError, match=r"control-variate m=40: m must be between 1 and 39"):
        sample(files / "regression.stan", files / "regression.json", "dc", settings)


def test_laplace_at_a_singular_hessian_is_refused_before_the_warmup(files):
    data = logistic_data(200, k=2, seed=1)
    data["X"] = np.column_stack([data["X"][:, 0], data["X"][:, 0]])  # collinear: w1 - w2 is not identified
    data["prior_scale"] = 0.0  # and no prior holds it
    lines = []
    with pytest.raises(ConfigError, match="approximation laplace of logistic: the Hessian .* is singular"):
        sample(program_path("logistic"), data, "dc", {"approx": {"kind": "laplace"}}, log=lines.append)
    assert not any("warm-up" in line for line in lines)


@pytest.mark.slow
def test_dc_over_control_variates_agrees_with_nuts_and_charges_its_setup(files):
    data = logistic_data(1000, seed=1)
    program = program_path("logistic")
    nuts = sample(program, data, "nuts", {"warmup": 500, "draws": 1500}, seed=5, progress=False)
    settings = {"warmup": 300, "draws": 1000, "inner": "hmc", "observations": OBSERVATIONS}
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)  # a close pi*: no spread warning
        result = sample(program, data, "dc", {**settings, "approx": {"kind": "control-variate", "m": 100}},
                        seed=7, progress=False, log=lines.append)  # fmt: skip
    report = result.reports["approximations"][0]
    assert report["approximation"] == "control-variate m=100" and report["log_ratio_sd"] < 0.2
    assert (
        report["relative_cost"] > 0
    )  # measured; how much cheaper is timed in benchmarks/approximation_spread.py
    assert result.charged_seconds["approximations"] > 0
    assert any(line.startswith("posterior mode by L-BFGS") for line in lines)
    assert any(
        line.startswith("approximation control-variate m=100: Taylor control variates") for line in lines
    )
    limit = norm.ppf(1 - 1e-3 / (2 * 2 * 6))  # Bonferroni over 6 means and 6 sds
    z = reference_z_scores(result.to_inference_data(), nuts.to_inference_data())
    assert np.all(np.abs(z) < limit), z
    assert result.metrics()["rhat_max"] < 1.05
    # the plain subset of the same size is far from pi, and says so
    with pytest.warns(ApproximationWarning, match="subset m=100: log pi - log pi. has sd"):
        short = {**settings, "warmup": 100, "draws": 10, "approx": {"kind": "subset", "m": 100}}
        sample(program, data, "dc", short, seed=7, progress=False)


def test_control_variates_on_a_program_whose_beta_is_bounded_by_one_are_refused_before_the_warmup(mvn_data):
    # mvn_mean declares real<lower=0, upper=1> beta; 5 of 20 observations scaled by N/m set beta = 4
    lines = []
    with pytest.raises(ProgramConventionError, match=r"control-variate m=5 .* sets beta = 4") as error:
        sample("mvn_mean", mvn_data, "dc", {"approx": {"kind": "control-variate", "m": 5}}, log=lines.append)
    assert "scale = false" not in str(error.value) and lines == []


def test_a_ladder_of_automatic_approximations_finds_the_mode_once(files):
    # On a Gaussian posterior both are exact: a quadratic log likelihood is its own Taylor expansion.
    data = regression_data(n=30, seed=7)
    settings = {
        "warmup": 100,
        "draws": 50,
        "ladder": [{"kind": "control-variate", "m": 10}, {"kind": "laplace"}],
        "observations": {"count": "N", "fields": ["x", "y"]},
    }
    lines = []
    result = sample(files / "regression.stan", data, "tt-approx", settings, progress=False, log=lines.append)
    assert sum(line.startswith("posterior mode by L-BFGS") for line in lines) == 1
    assert result.charged_seconds["approximations"] > 0
    reports = result.reports["approximations"]
    assert [r["approximation"] for r in reports] == ["control-variate m=10", "laplace"]
    assert all(r["log_ratio_sd"] < 1e-4 for r in reports)
