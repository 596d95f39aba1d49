"""What a method needs of the user's program: ``beta``, declared observations, approximations that match.

Each is refused before the program is compiled, with a message that says what to change.
"""

import re

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.sampling import ConfigError, ProgramConventionError, make_config, sample
from stanaccel.sampling.program import Program, check_finite_data, check_program, prepare_data
from stanaccel.stan import StanModel, write_data
from tests.sampling.programs import NO_BETA, OTHER_PARAMETERS, REGRESSION, regression_data

OBSERVATIONS = {"count": "N", "fields": ["x", "y"]}


@pytest.fixture
def files(tmp_path):
    for name, code in [("regression", REGRESSION), ("no_beta", NO_BETA), ("other", OTHER_PARAMETERS)]:
        (tmp_path / f"{name}.stan").write_text(code)
    write_data(tmp_path / "data.json", regression_data())
    return tmp_path


def check(method, settings, program, data):
    program = Program.of(program)
    check_program(make_config(method, settings), program, prepare_data(program, data))


@pytest.mark.parametrize("method", ["pt", "tt"])
def test_power_tempering_needs_beta_and_shows_the_change(files, method):
    with pytest.raises(ProgramConventionError, match="it has no data variable beta") as error:
        sample(files / "no_beta.stan", files / "data.json", method, progress=False)
    assert "real<lower=0> beta;" in str(error.value) and "target += beta * normal_lpdf" in str(error.value)
    check(method, {}, files / "regression.stan", files / "data.json")  # a temperable program passes


def test_beta_is_set_for_the_user(files):
    data = prepare_data(Program.of(files / "regression.stan"), files / "data.json")
    assert data["beta"] == 1.0
    assert "beta" not in prepare_data(Program.of(files / "no_beta.stan"), files / "data.json")


def test_subsampling_needs_declared_observations(files):
    with pytest.raises(
        ProgramConventionError, match='perhaps observations = { count = "N", fields = \\["x", "y"\\]'
    ):
        check("stt", {}, files / "no_beta.stan", files / "data.json")
    check(
        "spt", {"observations": OBSERVATIONS}, files / "no_beta.stan", files / "data.json"
    )  # no beta needed


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        ({"count": "M", "fields": ["x"]}, "the data have no variable 'M'"),
        ({"count": "N", "fields": ["x", "z"]}, "the data have no variable 'z'"),
        ({"count": "N", "fields": ["sigma"]}, "field 'sigma' is a scalar"),
        ({"count": "sigma", "fields": ["x"]}, "count 'sigma' must be an integer"),
    ],
)
def test_wrong_observations_are_refused(files, observations, message):
    with pytest.raises(ProgramConventionError, match=message):
        check("stt", {"observations": observations}, files / "no_beta.stan", files / "data.json")


def test_wrong_field_length_is_refused(files):
    data = regression_data()
    data["y"] = data["y"][:-1]
    with pytest.raises(ProgramConventionError, match=r"field 'y' has shape \(39,\).*N = 40"):
        check("spt", {"observations": OBSERVATIONS}, files / "no_beta.stan", data)


def test_scaled_subset_approximation_needs_beta(files):
    approx = {"approx": {"kind": "subset", "m": 10}, "observations": OBSERVATIONS}
    with pytest.raises(ProgramConventionError, match="no data variable beta"):
        check("dc", approx, files / "no_beta.stan", files / "data.json")
    check(
        "dc",
        {**approx, "approx": {"kind": "subset", "m": 10, "scale": False}},
        files / "no_beta.stan",
        files / "data.json",
    )


def test_approximation_with_other_parameters_is_refused(files):
    settings = {"approx": {"program": str(files / "other.stan")}}
    with pytest.raises(
        ProgramConventionError, match=r"coef \(real with 1 dimensions\).*a \(real\), b \(real\)"
    ):
        check("dc", settings, files / "regression.stan", files / "data.json")


def test_low_rank_is_only_for_gp_ard(files):
    with pytest.raises(ValueError, match="bundled low-rank approximation of gp_ard, not of regression"):
        check("dc", {"approx": {"kind": "fitc", "m": 5}}, files / "regression.stan", files / "data.json")


def test_method_needing_a_setting_names_it(files):
    with pytest.raises(ValueError, match="method 'dc' needs the setting 'approx'"):
        check("dc", {}, files / "regression.stan", files / "data.json")
    with pytest.raises(ValueError, match="method 'latent-nuts' needs the setting 'latent_program'"):
        check("latent-nuts", {}, files / "regression.stan", files / "data.json")


def test_subset_larger_than_the_data_is_refused_before_compiling(files):
    settings = {"approx": {"kind": "subset", "m": 50}, "observations": OBSERVATIONS}
    with pytest.raises(ConfigError, match=r"subset m=50: m must be between 1 and 39.*N = 40"):
        check("dc", settings, files / "regression.stan", files / "data.json")


@pytest.mark.parametrize(
    ("method", "settings"),
    [
        ("stt", {"observations": {"count": "N", "fields": ["y"]}}),
        ("dc", {"observations": {"count": "N", "fields": ["y"]}, "approx": {"kind": "subset", "m": 10}}),
    ],
)
def test_observations_leaving_out_a_field_are_refused_before_the_warmup(files, method, settings):
    # x has one entry per observation but is not among the fields: a subset's x keeps all 40
    lines = []
    with pytest.raises(
        ProgramConventionError, match=r"data variable x .*has the shape \(40\).*perhaps add 'x' to its fields"
    ):
        sample(
            files / "regression.stan",
            files / "data.json",
            method,
            {"warmup": 20, **settings},
            log=lines.append,
        )
    assert lines == []  # no warm-up started


def test_bounded_beta_refusing_n_over_m_is_named_before_the_warmup(mvn_data):
    # mvn_mean declares real<lower=0, upper=1> beta; a subset of 5 of 20 scaled by N/m sets beta = 4
    settings = {"warmup": 20, "draws": 20, "approx": {"kind": "subset", "m": 5}}
    lines = []
    with pytest.raises(
        ProgramConventionError, match=r"sets beta = 4, which mvn_mean refuses.*less than or equal to 1.*scale"
    ):
        sample("mvn_mean", mvn_data, "dc", settings, log=lines.append)
    assert lines == []


def test_h_pcn_on_a_stan_program_is_refused_before_compiling(files):
    for method, settings in [("h-pcn", {}), ("dc", {"inner": "h-pcn", "approx": {"kind": "subset", "m": 3}})]:
        with pytest.raises(ConfigError, match="h-pCN needs a Laplace approximation.*use pcn"):
            sample(files / "missing.stan", files / "data.json", method, settings)


def test_latent_dim_above_the_dimension_is_refused_before_the_warmup(files):
    lines = []
    with pytest.raises(ConfigError, match="settings: latent_dim = 3: must be below 2, the number"):
        sample(files / "regression.stan", files / "data.json", "ae-hmc", {"latent_dim": 3}, log=lines.append)
    assert lines == []


def test_malformed_data_json_names_the_file_and_json(files, capsys):
    bad = files / "bad.json"
    bad.write_text('{"N": 3,\n "y": [1, 2, ]}')
    with pytest.raises(ValueError, match=r"data file .*bad.json: not valid JSON: Expecting value at line 2"):
        sample(files / "regression.stan", bad, "mh")
    assert (
        main(["sample", str(files / "regression.stan"), "--data", str(bad), "-o", str(files / "x.nc")]) == 2
    )
    assert "bad.json: not valid JSON" in capsys.readouterr().err


def test_nan_in_the_data_names_the_variable_before_the_warmup(files, capsys):
    data = regression_data()
    data["y"] = np.asarray(data["y"], dtype=float)
    data["y"][3] = np.nan
    write_data(files / "nan.json", data)
    lines = []
    with pytest.raises(ValueError, match=r"nan.json: y\[4\] = nan: NaN or infinity in the data"):
        sample(files / "regression.stan", files / "nan.json", "mh", {"warmup": 20}, log=lines.append)
    assert lines == []
    for command in (["sample", "--method", "hmc"], ["nuts"]):
        argv = [command[0], str(files / "regression.stan"), "--data", str(files / "nan.json"), *command[1:]]
        assert main([*argv, "-o", str(files / "x.nc")]) == 2
        assert "y[4] = nan: NaN or infinity in the data" in capsys.readouterr().err


def test_extreme_values_in_the_data_are_named_before_the_warmup(files, capsys):
    # y of 1e300: its square is infinite, and Stan said only "Initialization failed"
    data = regression_data()
    data["y"] = np.asarray(data["y"], dtype=float)
    data["y"][2] = 1e300
    write_data(files / "big.json", data)
    expected = (
        r"big.json: y\[3\] = 1e\+300: a value beyond ±1e150 or nonzero within ±1e-150, where arithmetic"
    )
    lines = []
    with pytest.raises(ValueError, match=expected + r".*regression cannot use \(the log density is -inf\)"):
        sample(files / "regression.stan", files / "big.json", "mh", {"warmup": 20}, log=lines.append)
    assert lines == []
    program = files / "regression.stan"
    assert main(["nuts", str(program), "--data", str(files / "big.json"), "-o", str(files / "x.nc")]) == 2
    assert re.search(expected, capsys.readouterr().err)
    data["y"][2] = 1e-300  # extreme too, but the program's arithmetic takes it: no complaint
    data = prepare_data(Program.of(program), data)
    check_finite_data(StanModel(program, data), data)


@pytest.mark.parametrize("settings", [{"beta_min": 0.01}, {"betas": [1.0, 0.5, 0.02]}])
def test_a_ladder_whose_hottest_subset_the_program_refuses_is_named_before_the_warmup(files, settings):
    # regression.stan declares int<lower=2> N; 0.01 or 0.02 of its 40 observations rounds to 0 or 1
    key = next(iter(settings))
    lines = []
    with pytest.raises(
        ConfigError, match=rf"settings: {key}: the ladder's hottest level .* takes [01] of the 40"
    ):
        sample(
            files / "regression.stan",
            files / "data.json",
            "spt",
            {"warmup": 20, "observations": OBSERVATIONS, **settings},
            log=lines.append,
        )
    assert lines == []
