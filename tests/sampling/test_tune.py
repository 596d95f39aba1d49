"""``sample(..., tune=...)`` and ``stanaccel sample --tune``: Bayesian optimisation of a sampler's settings.

The tuned run must still sample the known posterior (the tuning only picks
settings; the final chain does not adapt), its trials' time must be charged,
and mistakes in the tuning options must be ConfigErrors that name them.
"""

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.sampling import sample
from stanaccel.sampling.config import ConfigError
from stanaccel.sampling.tune import TuneSpec, default_space
from stanaccel.stan import write_data
from tests.sampling.programs import REGRESSION, regression_data
from tests.sampling.test_sample import check_exact

SHORT = {"warmup": 300, "draws": 1000}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tuned_program")
    (folder / "regression.stan").write_text(REGRESSION)
    data = regression_data()
    write_data(folder / "regression.json", data)
    return folder, data


def test_tuned_hmc_charges_its_trials_and_still_samples_the_posterior(files):
    folder, data = files
    spec = {"budget": 6, "draws": 100, "chains": 1}
    result = sample(folder / "regression.stan", folder / "regression.json", "hmc", SHORT, seed=5,
                    progress=False, tune=spec)  # fmt: skip
    check_exact(result, data)
    trials = result.reports["tuning"]
    assert len(trials) == 6
    assert result.charged_seconds["tuning"] >= sum(t["seconds"] for t in trials) * 0.99
    assert result.sources["step_size"] == result.sources["n_steps"] == "bayesian optimisation"
    space = default_space("hmc", {"step_size": None})
    assert space.names == ["step_size", "n_steps"]
    assert 1 <= result.config.n_steps <= 40


def test_cli_tune_space_and_objective(files, capsys):
    folder, _ = files
    out = folder / "tuned.nc"
    argv = [
        "sample", str(folder / "regression.stan"), "--data", str(folder / "regression.json"),
        "--method", "mh",
        "--warmup", "200", "--draws", "300", "--chains", "2", "--tune-budget", "4", "--tune-draws", "100",
        "--tune-objective", "autocorrelation", "--tune-space", "scale={log=[0.1, 2.0]}", "-o", str(out), "-q",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "tuned by Bayesian optimisation" in printed.err
    assert "tuning" in printed.out  # the charged time on the summary line
    assert out.exists()


def test_user_settings_are_kept_and_tuning_what_the_user_set_is_an_error(files):
    folder, _ = files
    with pytest.raises(ConfigError, match="step_size"):
        sample(folder / "regression.stan", folder / "regression.json", "hmc", {**SHORT, "step_size": 0.1},
               progress=False, tune=True)  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budget": 0}, "budget must be at least 1"),
        ({"objective": "speed"}, "tune objective 'speed'"),
        ({"trials": 3}, "unknown tune option"),
        ({"space": {"stepsize": {"log": [0.01, 1.0]}}}, "step_size"),
        ({"space": {"n_steps": {"int": [5, 2]}}}, "n_steps"),
    ],
)
def test_bad_tune_options_are_named(files, options, message):
    folder, _ = files
    with pytest.raises(ConfigError, match=message):
        sample(folder / "regression.stan", folder / "regression.json", "hmc", {"warmup": 50, "draws": 10},
               progress=False, tune=options)  # fmt: skip


def test_nuts_cannot_be_tuned(files):
    folder, _ = files
    with pytest.raises(ConfigError, match="adapts itself"):
        sample(folder / "regression.stan", folder / "regression.json", "nuts", tune=True, progress=False)
    with pytest.raises(ConfigError, match="no default search space"):
        default_space("latent-nuts", {})
    assert TuneSpec().budget == 16 and np.isfinite(TuneSpec().draws)
