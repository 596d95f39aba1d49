"""What a method needs of the user's program: ``beta``, declared observations, approximations that match.

Each is refused before the program is compiled, with a message that says what to change.
"""

import pytest

from stanaccel.sampling import ProgramConventionError, make_config, sample
from stanaccel.sampling.program import Program, check_program, prepare_data
from stanaccel.stan import write_data
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
