"""Sampler settings are checked before anything compiles or runs, from Python, TOML and the command line."""

import pytest

from stanaccel.cli import main
from stanaccel.sampling import METHODS, ConfigError, keys, make_config, sample
from stanaccel.sampling.config import parse_assignment, table_rows
from stanaccel.workflow import load_workflow


def test_every_method_has_a_config_with_defaults():
    assert set(METHODS) == {
        "nuts",
        "hmc",
        "mh",
        "pcn",
        "h-pcn",
        "pt",
        "tt",
        "spt",
        "stt",
        "dc",
        "tt-approx",
        "ae-hmc",
        "ae-pcn",
        "latent-nuts",
    }
    for method in METHODS:
        config = make_config(method, {})
        assert {"chains", "draws", "warmup"} <= set(keys(method)) and config.method == method


@pytest.mark.parametrize(
    ("method", "settings", "message"),
    [
        ("pt", {"levles": 3}, "unknown setting 'levles' for method 'pt'; allowed: .*did you mean 'levels'"),
        ("mh", {"step_size": 0.1}, "unknown setting 'step_size' for method 'mh'"),
        ("pt", {"inner": "nuts"}, "inner = 'nuts': expected one of 'mh', 'hmc'"),
        ("hmc", {"n_steps": 0}, "n_steps = 0: must be at least 1"),
        ("hmc", {"n_steps": 2.5}, "n_steps = 2.5: expected an integer"),
        ("pcn", {"pcn_step": 4}, "pcn_step = 4: must be below 4"),
        ("tt", {"betas": [1, 0.5, 0.7]}, r"expected 1 = beta_0 > beta_1 > \.\.\. > 0"),
        ("dc", {"approx": {"kind": "subset"}}, "approx.m = None: kind 'subset' needs a positive integer m"),
        ("dc", {"approx": {"knd": "subset", "m": 3}}, "approx: unknown key 'knd'.*did you mean 'kind'"),
        ("spt", {"observations": {"count": "N"}}, 'observations = .*expected a table { count = "N"'),
        ("hcm", {}, "unknown method; expected one of nuts, .*did you mean 'hmc'"),
    ],
)
def test_bad_settings_name_the_key_and_what_is_allowed(method, settings, message):
    with pytest.raises(ConfigError, match=message):
        make_config(method, settings, sources="settings=")


def test_python_errors_say_where_and_come_before_compiling(tmp_path):
    # A program that does not exist: the settings are refused first.
    with pytest.raises(ConfigError, match="^settings: unknown setting 'stpe_size'"):
        sample(tmp_path / "missing.stan", None, "hmc", {"stpe_size": 0.1}, sources="settings")


def test_precedence_user_then_tuned_then_default():
    config = make_config("hmc", {"n_steps": 20})
    resolved, sources = config.resolve({"step_size": 0.3})
    assert (resolved.n_steps, sources["n_steps"]) == (20, "user")
    assert (resolved.step_size, sources["step_size"]) == (0.3, "tuned")
    assert sources["precondition"] == "default"
    mine, sources = make_config("hmc", {"step_size": 0.05}).resolve({"step_size": 0.3})
    assert (mine.step_size, sources["step_size"]) == (0.05, "user")
    fallback, sources = make_config("mh", {}).resolve({})
    assert (fallback.scale, sources["scale"]) == (0.1, "default")


def test_cli_assignments_are_toml():
    assert parse_assignment("n_steps=20") == ("n_steps", 20)
    assert parse_assignment("inner=mh") == ("inner", "mh")
    assert parse_assignment('observations={count="N", fields=["x"]}') == (
        "observations",
        {"count": "N", "fields": ["x"]},
    )
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_assignment("n_steps")


def test_cli_names_the_flag(capsys):
    assert main(["sample", "mvn_mean", "--method", "stt", "--set", "inenr=mh", "-o", "/tmp/x.nc"]) == 2
    err = capsys.readouterr().err
    assert "--set inenr=mh: unknown setting 'inenr' for method 'stt'" in err and "did you mean 'inner'" in err


def test_cli_names_the_config_file(tmp_path, capsys):
    config = tmp_path / "hmc.toml"
    config.write_text('method = "hmc"\nn_steps = -1\n')
    assert main(["sample", "mvn_mean", "--config", str(config), "-o", str(tmp_path / "x.nc")]) == 2
    assert f"{config}: n_steps = -1: must be at least 1" in capsys.readouterr().err


def test_workflow_file_names_file_step_and_key(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(
        '[workflow]\nname = "w"\n[[steps]]\nname = "s"\naction = "sample"\nprogram = "mvn_mean"\n'
        'method = "pt"\ninner = "mh"\nswpa = "random"\n'
    )
    with pytest.raises(ValueError, match=r"w.toml: step 's' \(action sample\): unknown key 'swpa'.*'swap'"):
        load_workflow(path)
    path.write_text(
        '[workflow]\nname = "w"\n[[steps]]\nname = "s"\naction = "sample"\nprogram = "mvn_mean"\n'
        'method = "pt"\nlevels = 0\n'
    )
    with pytest.raises(
        ValueError, match=r"w.toml: step 's' \(action sample\): levels = 0: must be at least 1"
    ):
        load_workflow(path)


def test_readme_table_covers_every_setting():
    rows = {row["key"] for row in table_rows()}
    for method in METHODS:
        assert set(keys(method)) <= rows
