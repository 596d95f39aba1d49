"""Sampler settings are checked before anything compiles or runs, from Python, TOML and the command line."""

import pytest

from stanaccel.cli import main
from stanaccel.sampling import METHODS, ConfigError, keys, make_config, sample
from stanaccel.sampling.config import NEEDED_EXAMPLES, check_setting, parse_assignment, table_rows
from stanaccel.workflow import load_workflow


def test_every_method_has_a_config_with_defaults():
    assert set(METHODS) == {
        "nuts",
        "hmc",
        "mh",
        "mala",
        "imh",
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
        ("tt", {"betas": [1, 0.5, 0.7]}, r"expected 1 = beta_0 > beta_1 > \.\.\. >= 0"),
        ("pt", {"step_factors": [1, 0]}, r"step_factors = \[1, 0\]: expected positive numbers"),
        ("pt", {"step_factors": [1, 2]}, "step_factors are given without betas"),
        ("pt", {"betas": [1, 0.5, 0], "step_factors": [1, 2]}, "step_factors has 2 values for 3 betas"),
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


@pytest.mark.parametrize(
    ("method", "settings", "message"),
    [
        ("mh", {"scale": float("inf")}, "scale = inf: expected a finite number"),
        ("mh", {"scale": 1e300}, r"scale = 1e\+300: must be at most 1e\+06"),
        ("hmc", {"step_size": float("inf")}, "step_size = inf: expected a finite number"),
        ("hmc", {"step_size": float("nan")}, "step_size = nan: expected a finite number"),
        ("pcn", {"prior_sd": 1e7}, r"prior_sd = 10000000.0: must be at most 1e\+06"),
        ("tt", {"betas": [1, float("nan")]}, r"betas = \[1, nan\]: expected finite numbers"),
    ],
)
def test_non_finite_and_absurd_numbers_are_refused(method, settings, message):
    with pytest.raises(ConfigError, match=f"^--set x: {message}"):
        make_config(method, settings, sources="--set x")


def test_non_finite_setting_on_the_command_line_names_set(capsys):
    assert main(["sample", "mvn_mean", "--method", "hmc", "--set", "step_size=nan", "-o", "/tmp/x.nc"]) == 2
    assert "--set step_size=nan: step_size = nan: expected a finite number" in capsys.readouterr().err


def test_non_finite_setting_in_a_workflow_names_the_file(tmp_path):
    path = tmp_path / "w.toml"
    path.write_text(
        '[workflow]\nname = "w"\n[[steps]]\nname = "s"\naction = "sample"\nprogram = "mvn_mean"\n'
        'method = "mh"\nscale = inf\n'
    )
    with pytest.raises(
        ValueError, match=r"w.toml: step 's' \(action sample\): scale = inf: expected a finite"
    ):
        load_workflow(path)


@pytest.mark.parametrize("settings", [[("scale", 1)], "scale=1", 3])
def test_settings_that_are_not_a_dict_are_a_type_error(settings):
    with pytest.raises(TypeError, match="settings must be a dict of setting name -> value"):
        sample("mvn_mean", None, "mh", settings)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"program": 123}, r"program must be a .stan file \(a str or Path\), a bundled program's name, a "
         r"CompiledProgram or a StanModel; not int \(123\)"),
        ({"program": None}, "program must be a .stan file .*; not NoneType"),
        ({"program": {"code": "x"}}, "program must be .*; not dict"),
        ({"data": 123}, r"data must be a dict of the program's data, a Stan JSON file \(a str or Path\), or "
         r"None; not int \(123\)"),
        ({"data": ["data.json"]}, "data must be .*; not list"),
        ({"warmup_from": 123}, r"warmup_from must be a WarmupState, a netCDF file .*; not int \(123\)"),
        ({"warmup_from": {"a": 1}}, "warmup_from must be .*; not dict"),
        ({"warmup_from": ["a.csv", 2]}, r"warmup_from must be .*; not int \(2\)"),
        ({"method": None}, "method must be a method's name, one of nuts, .*, auto; not NoneType"),
        ({"checkpoint": 5}, r"checkpoint must be a folder \(a str or Path\) or None; not int"),
        ({"log": "x"}, "log must be a function that takes a line of text"),
        ({"tune": "yes"}, r"tune must be True \(tune with the default options\), a dict of options such as "
         r"\{'budget': 16, .*\}, a TuneSpec, or None or False \(no tuning\); not str \('yes'\)"),
        ({"tune": 1}, r"tune must be True .*; not int \(1\)"),
    ],
)  # fmt: skip
def test_sample_names_an_argument_of_the_wrong_type_and_what_it_takes(arguments, message):
    # Before anything is read or compiled: these were pathlib's "expected str, bytes or os.PathLike object,
    # not int", "'int' object is not iterable", or a failure deep in the run.
    given = {"program": "mvn_mean", "data": None, "method": "mh", **arguments}
    with pytest.raises(TypeError, match=message):
        sample(given.pop("program"), given.pop("data"), given.pop("method"), **given)


@pytest.mark.parametrize(
    ("method", "key", "example"),
    [
        ("dc", "approx", """approx = { kind = "laplace" }"""),
        ("tt-approx", "ladder", """ladder = [{ kind = "subset", m = 1000 }, { kind = "laplace" }]"""),
    ],
)
def test_a_setting_a_method_needs_is_asked_for_with_an_example(mvn_data, method, key, example):
    # (latent-nuts's latent_program too; its run imports Keras first, 6 s)
    with pytest.raises(
        ConfigError, match=rf"^method '{method}' needs the setting '{key}', such as "
    ) as error:
        sample("mvn_mean", mvn_data, method)
    assert example in str(error.value)


@pytest.mark.parametrize(("method", "key"), [("dc", "approx"), ("tt-approx", "ladder")])
def test_the_example_of_a_needed_setting_is_a_setting_the_method_takes(method, key):
    command_line = NEEDED_EXAMPLES[key].split("on the command line --set ")[1].strip("'")
    assert parse_assignment(command_line)[0] == key
    check_setting(method, *parse_assignment(command_line))


@pytest.mark.parametrize(("method", "close"), [("Auto", "auto"), ("aut", "auto"), ("hcm", "hmc")])
def test_an_unknown_method_names_auto_too_and_the_closest(method, close):
    with pytest.raises(ConfigError, match=rf"method = '{method}': unknown method; expected one of nuts, .*, "
                       rf"latent-nuts, auto; did you mean '{close}'\?"):  # fmt: skip
        sample("mvn_mean", None, method)


def test_an_empty_warmup_from_and_include_paths_for_a_compiled_program_are_refused(mvn_program):
    with pytest.raises(ValueError, match=r"warmup_from = \[\]: give a netCDF file"):
        sample("mvn_mean", None, "mh", warmup_from=[])
    with pytest.raises(ValueError, match="include_paths is for a .stan file's #include lines"):
        sample(mvn_program, None, "mh", include_paths=["lib"])


@pytest.mark.parametrize("command", ["sample", "nuts", "run"])
def test_negative_seed_names_the_option(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, "mvn_mean", "--seed", "-1"])
    assert stop.value.code == 2
    assert "argument --seed: '-1' is not a seed: expected a non-negative integer" in capsys.readouterr().err


def test_negative_seed_in_python_and_workflow_files(tmp_path):
    with pytest.raises(ValueError, match=r"seed = -1: expected a non-negative integer below 2\*\*63"):
        sample("mvn_mean", None, "mh", {}, seed=-1)
    path = tmp_path / "w.toml"
    path.write_text(
        '[workflow]\nname = "w"\nseed = -1\n[[steps]]\nname = "s"\naction = "sample"\nprogram = "mvn_mean"\n'
    )
    with pytest.raises(ValueError, match=r"w.toml: \[workflow\] seed = -1: expected a non-negative integer"):
        load_workflow(path)
