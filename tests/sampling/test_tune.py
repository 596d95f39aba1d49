"""``sample(..., tune=...)`` and ``stanaccel sample --tune``: Bayesian optimisation of a sampler's settings.

The tuned run must still sample the known posterior (the tuning only picks
settings; the final chain does not adapt), its trials' time must be charged,
and mistakes in the tuning options must be ConfigErrors that name them.
Tuning cannot make things worse: the default is measured (twice) and kept
unless a setting beats it by more than the noise, and a failing trial
scores as the worst without stopping the search.
"""

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.kernels import geometric_betas, nested_subsets
from stanaccel.sampling import sample
from stanaccel.sampling.config import ConfigError
from stanaccel.sampling.tune import TuneSpec, default_space
from stanaccel.stan import write_data
from tests.sampling.programs import REGRESSION, regression_data
from tests.sampling.test_sample import OBSERVATIONS, check_exact

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
    assert [t["role"] for t in trials[:3]] == ["default", "default again", "search"]
    assert len(trials) in (5, 6)  # the best measured again unless it is the default
    assert result.charged_seconds["tuning"] >= sum(t["seconds"] for t in trials) * 0.99
    summary = result.metrics()["tuning"]
    chosen = "default" if summary["kept_default"] else "bayesian optimisation"
    assert (result.sources["step_size"] == "tuned") == summary["kept_default"]
    assert result.sources["n_steps"] == chosen
    assert {"step_size": result.config.step_size, "n_steps": result.config.n_steps} == summary["chosen"]
    assert len(summary["default_scores"]) == 2 and summary["noise"] >= 0 and summary["distinct"] >= 4
    space = default_space("hmc", {"step_size": None})
    assert space.names == ["step_size", "n_steps"]
    assert 1 <= result.config.n_steps <= 40


def test_the_default_is_kept_when_no_setting_beats_it(files):
    folder, _ = files
    # MH steps a thousand times too small: every setting of this space mixes far worse than the default.
    # Per evaluation (not per second), so the scores do not depend on the machine's timing.
    space = {"scale": {"log": [1e-4, 1e-3]}}
    spec = {"budget": 5, "draws": 400, "chains": 2, "objective": "ess-per-evaluation", "space": space}
    settings = {"warmup": 200, "draws": 100}
    result = sample(folder / "regression.stan", folder / "regression.json", "mh", settings, seed=2,
                    progress=False, tune=spec)  # fmt: skip
    summary = result.reports["tuning_summary"]
    trials = result.reports["tuning"]
    default = trials[0]["scale"]
    assert [t["role"] for t in trials] == ["default", "default again", "search", "search"]
    assert trials[1]["scale"] == default and summary["distinct"] == 3
    assert summary["kept_default"] and summary["chosen"] == {"scale": default} == summary["default"]
    assert summary["reason"] == "no trial beat the default" and summary["best_scores"] is None
    assert summary["default_spread"] == abs(trials[0]["value"] - trials[1]["value"]) == summary["noise"]
    assert result.config.scale == default > 1e-3 and result.sources["scale"] == "tuned"
    assert all(t["value"] < min(summary["default_scores"]) for t in trials[2:])


def test_a_failing_trial_scores_worst_and_the_search_goes_on(files, capsys):
    folder, _ = files
    # beta_min below 1/N: the subsets of the ladder's top levels have fewer observations than N >= 2 allows.
    spec = {"budget": 6, "draws": 50, "chains": 1, "space": {"beta_min": {"log": [1e-3, 2e-3]}}}
    settings = {"warmup": 100, "draws": 100, "observations": OBSERVATIONS, "inner": "mh", "levels": 3}
    result = sample(folder / "regression.stan", folder / "regression.json", "stt", settings, seed=1,
                    progress=False, tune=spec, log=print)  # fmt: skip
    trials = result.reports["tuning"]
    searched = [t for t in trials if t["role"] == "search"]
    assert len(searched) == 3 and all(t["value"] is None and "N is" in t["failed"] for t in searched)
    assert [t["failed"] for t in trials[:2]] == [None, None]
    assert result.config.beta_min == 0.125 and result.metrics()["tuning"]["failed"] == 3
    printed = capsys.readouterr().out
    assert "failed, scored worst (StanDataError" in printed and "keeping the default" in printed


def test_subsampled_ladders_default_space_builds_no_subset_the_program_rejects(files):
    folder, data = files
    # REGRESSION declares int<lower=2> N: a subset of 0 or 1 observations is rejected.
    settings = {"warmup": 100, "draws": 100, "observations": OBSERVATIONS, "inner": "mh"}
    spec = {"budget": 8, "draws": 100, "chains": 1}
    result = sample(folder / "regression.stan", folder / "regression.json", "stt", settings, seed=3,
                    progress=False, tune=spec)  # fmt: skip
    trials = result.reports["tuning"]
    assert len(trials) >= 7 and all(t["failed"] is None for t in trials)
    space = default_space("stt", {}, beta_floor=2 / data["N"])
    low = space.dimensions[0].low
    rng = np.random.default_rng(0)
    assert min(len(s) for s in nested_subsets(data["N"], geometric_betas(12, low), rng)) == 2
    assert [d.name for d in default_space("spt", {}, beta_floor=0.6).dimensions] == ["levels"]


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
        ({"budget": 3}, "budget must be at least 4"),
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
