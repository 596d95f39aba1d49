"""``stanaccel.sampling.sample`` on a Stan program written here, for every method family.

The posterior is Gaussian and known exactly (tests/sampling/programs.py), so
each exact method's means and sds are checked in units of their Monte Carlo
standard error. 11 runs x 2 coefficients x (mean, sd) = 44 z-scores; a
bound of 4 gives each a two-sided chance of 6e-5 and the family about 0.3%
(the seeds are fixed, so a run either passes or fails every time).
"""

import json
import warnings

import arviz as az
import numpy as np
import pytest

from stanaccel.diagnostics import mcse_z_scores
from stanaccel.sampling import ApproximationWarning, sample
from stanaccel.stan import write_data
from tests.sampling.programs import REGRESSION, REGRESSION_LATENT, regression_data, regression_posterior

Z_LIMIT = 4.0
OBSERVATIONS = {"count": "N", "fields": ["x", "y"]}
SHORT = {"warmup": 300, "draws": 1000}
PLACED = {"schedule_rounds": 4}
"""A ladder placed in 4 rounds (30 scans; tt's took 0.2 s where the default 8 took 6 s of its run's 15): how
well it is placed changes a tempering run's ESS, not the posterior the z-scores check. The default rounds
are checked on their own in tests/sampling/test_tempering_schedule.py."""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user_program")
    (folder / "regression.stan").write_text(REGRESSION)
    (folder / "regression_latent.stan").write_text(REGRESSION_LATENT)
    data = regression_data()
    write_data(folder / "regression.json", data)
    half = {**data, "N": 20, "x": data["x"][:20], "y": data["y"][:20]}
    write_data(folder / "half.json", half)
    return folder, data


def check_exact(result, data):
    mean, sd = regression_posterior(data)
    idata = result.to_inference_data()
    assert idata.posterior.attrs["exact"] == 1
    z_mean, z_sd = mcse_z_scores(idata, "coef", mean, sd)
    assert np.all(np.abs(z_mean) < Z_LIMIT), (result.method, z_mean)
    assert np.all(np.abs(z_sd) < Z_LIMIT), (result.method, z_sd)
    assert result.metrics()["rhat_max"] < 1.05


# Each method's defaults and every combination of inner kernel, approximation and warm-up are in the
# correctness matrix (tests/sampling/matrix.py); these are the settings it does not vary: placed
# ladders (levels), several mark moves and jumps, ladders of two approximations.
EXACT = [
    ("pt", {"inner": "mh", **PLACED}),
    ("tt", {"inner": "hmc", "levels": 3, **PLACED}),
    ("spt", {"observations": OBSERVATIONS, "levels": 3, **PLACED}),
    ("stt", {"observations": OBSERVATIONS, "inner": "mh", "levels": 3, **PLACED}),
    ("dc", {"approx": {"kind": "subset", "m": 30}, "observations": OBSERVATIONS, "moves": 2}),
    (
        "tt-approx",
        {"ladder": [{"kind": "subset", "m": 30}, {"kind": "subset", "m": 20}], "observations": OBSERVATIONS},
    ),
    ("dc", {"approx": {"kind": "control-variate", "m": 10}, "observations": OBSERVATIONS, "jump": 3}),
    (
        "tt-approx",
        {"ladder": [{"kind": "control-variate", "m": 10}, {"kind": "laplace"}], "observations": OBSERVATIONS},
    ),
]


@pytest.mark.parametrize(("method", "settings"), EXACT, ids=[m for m, _ in EXACT])
@pytest.mark.slow
def test_exact_methods_sample_the_known_posterior(files, method, settings):
    folder, data = files
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        method,
        {**SHORT, **settings},
        seed=11,
        progress=False,
    )
    assert result.method == method and not result.interrupted
    check_exact(result, data)
    if method != "nuts":
        assert result.charged_seconds["warmup"] > 0  # the warm-up is charged


def test_tuned_values_are_used_unless_set(files):
    folder, _ = files
    tuned = sample(
        folder / "regression.stan", folder / "regression.json", "hmc", SHORT, seed=2, progress=False
    )
    assert tuned.sources["step_size"] == "tuned" and tuned.sources["n_steps"] == "default"
    assert tuned.config.step_size > 0 and tuned.config.step_size != 0.1  # the adapted one, not the fallback
    mine = sample(
        folder / "regression.stan",
        folder / "regression.json",
        "hmc",
        {**SHORT, "step_size": 0.05},
        seed=2,
        progress=False,
    )
    assert mine.sources["step_size"] == "user" and mine.config.step_size == 0.05
    settings = json.loads(mine.to_inference_data().posterior.attrs["settings"])
    assert settings["step_size"] == 0.05 and settings["method"] == "hmc"


def test_program_approximation_on_other_data(files):
    folder, data = files
    approx = {"program": str(folder / "regression.stan"), "data": str(folder / "half.json")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        result = sample(
            folder / "regression.stan",
            folder / "regression.json",
            "dc",
            {**SHORT, "approx": approx},
            seed=5,
            progress=False,
        )
    report = result.reports["approximations"][0]
    assert report["relative_cost"] > 0 and report["log_ratio_sd"] > 0
    check_exact(result, data)


def test_wide_approximation_warns(files):
    folder, _ = files
    settings = {
        **SHORT,
        "draws": 50,
        "approx": {"kind": "subset", "m": 2, "scale": True},
        "observations": OBSERVATIONS,
    }
    with pytest.warns(ApproximationWarning, match="sd of|has sd"):
        sample(folder / "regression.stan", folder / "regression.json", "dc", settings, seed=5, progress=False)


@pytest.mark.slow
def test_same_seed_same_draws(files):
    folder, _ = files
    runs = [
        sample(
            folder / "regression.stan",
            folder / "regression.json",
            "stt",
            {
                "warmup": 200,
                "draws": 100,
                "observations": OBSERVATIONS,
                "levels": 3,
                **PLACED,
            },  # its ladder too
            seed=4,
            progress=False,
        ).draws()
        for _ in range(2)
    ]
    np.testing.assert_array_equal(*runs)


def test_result_verbs(files, tmp_path):
    folder, _ = files
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        "mh",
        {"warmup": 200, "draws": 200},
        seed=3,
        progress=False,
    )
    assert result.draws().shape == (4, 200, 2)
    assert list(result.summary().index) == ["coef[1]", "coef[2]"]
    metrics = result.metrics()
    assert metrics["wall_seconds"] > metrics["sampling_seconds"] > 0  # the warm-up is charged
    assert metrics["ess_per_second"] < metrics["ess_per_second_sampling"]
    assert metrics["evaluations"] > 0 and metrics["exact"] is True
    path = result.save(tmp_path / "fit.nc")
    back = az.from_netcdf(path)
    np.testing.assert_allclose(
        back.posterior["coef"].values, result.to_inference_data().posterior["coef"].values
    )
    attrs = back.posterior.attrs
    assert attrs["method"] == "mh" and json.loads(attrs["setting_sources"])["scale"] == "tuned"


def test_warmup_from_an_earlier_nuts_run(files, tmp_path):
    folder, data = files
    nuts = sample(
        folder / "regression.stan", folder / "regression.json", "nuts", SHORT, seed=8, progress=False
    )
    nuts.save(tmp_path / "nuts.nc")
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        "hmc",
        {"draws": 1000},
        seed=8,
        progress=False,
        warmup_from=tmp_path / "nuts.nc",
    )
    assert "warmup" not in result.charged_seconds
    check_exact(result, data)


@pytest.mark.parametrize("method", ["ae-hmc", "ae-pcn"])
@pytest.mark.slow
def test_latent_samplers_exact_mode(files, method):
    folder, data = files
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        method,
        {**SHORT, "latent_dim": 1, "epochs": 200, "tune": 50},
        seed=6,
        progress=False,
    )
    assert result.charged_seconds["training"] > 0 and result.reports["autoencoder"]["latent_dim"] == 1
    check_exact(result, data)


@pytest.mark.slow
def test_latent_nuts_is_marked_approximate(files):
    folder, data = files
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        "latent-nuts",
        {
            "warmup": 300,
            "draws": 300,
            "latent_dim": 1,
            "epochs": 200,
            "latent_program": str(folder / "regression_latent.stan"),
        },
        seed=6,
        progress=False,
    )
    idata = result.to_inference_data()
    assert idata.posterior.attrs["exact"] == 0 and "approximate" in idata.posterior.attrs["invariance"]
    mean, sd = regression_posterior(data)
    # Decoded from a 1-D latent space, the draws lie on a line through the posterior: its mean is close.
    np.testing.assert_allclose(result.draws(concat_chains=True).mean(axis=0), mean, atol=0.5 * sd.max())


@pytest.mark.slow
def test_approximate_ae_pcn_says_so(files):
    folder, _ = files
    result = sample(
        folder / "regression.stan",
        folder / "regression.json",
        "ae-pcn",
        {"warmup": 200, "draws": 100, "exact": False, "latent_dim": 1, "epochs": 50, "tune": 20},
        seed=6,
        progress=False,
    )
    assert result.metrics()["exact"] is False and "AE-pCN (approximate)" == result.metrics()["sampler"]


def test_the_check_fails_a_sampler_of_the_wrong_posterior(files):
    """The z-score check has power: MH on a subset's posterior (what a broken DC would sample) fails it."""
    folder, data = files
    result = sample(folder / "regression.stan", folder / "half.json", "mh", SHORT, seed=11, progress=False)
    with pytest.raises(AssertionError):
        check_exact(result, data)
