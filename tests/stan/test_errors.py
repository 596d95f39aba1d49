"""Every error a user meets names its cause."""

import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.stan import (
    StanBuildError,
    StanCompileError,
    StanDataError,
    StanDomainError,
    StanModel,
    compile_program,
    write_data,
)
from stanaccel.stan.toolchain import find_toolchain


def test_syntax_error_gives_line_and_column():
    with pytest.raises(StanCompileError) as info:
        compile_program("parameters {\n  real y\n}\nmodel {\n  y ~ normal(0, 1);\n}\n")
    message = str(info.value)
    assert "line 3" in message and "column" in message
    assert "Syntax error" in message


def test_type_error_gives_line_and_column():
    with pytest.raises(StanCompileError) as info:
        compile_program("parameters {\n  real y;\n}\nmodel {\n  int k = 2.5;\n  y ~ normal(0, 1);\n}\n")
    message = str(info.value)
    assert "Semantic error" in message and "line 5" in message and "column" in message


def test_missing_program_file():
    with pytest.raises(FileNotFoundError, match="nowhere.stan"):
        compile_program("nowhere.stan")


def test_no_compiler_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("STANACCEL_CACHE", str(tmp_path))  # nothing cached: a build is needed
    monkeypatch.setenv("CXX", "/nonexistent/g++")
    with pytest.raises(StanBuildError, match="no C\\+\\+ compiler found"):
        compile_program("parameters { real y; } model { y ~ normal(0, 1); }")


def test_a_failed_cpp_build_gives_the_compilers_message_and_a_build_its_cpu_seconds(tmp_path):
    toolchain = find_toolchain()
    bad = tmp_path / "bad.cpp"
    bad.write_text("int f() { return undefined_thing; }\n")
    with pytest.raises(StanBuildError, match=r"(?s)C\+\+ build of a test file failed .*undefined_thing"):
        toolchain.run_compiler(["-c", str(bad), "-o", str(tmp_path / "bad.o")], "a test file")
    good = tmp_path / "good.cpp"
    good.write_text("int f() { return 1; }\n")
    assert toolchain.run_compiler(["-c", str(good), "-o", str(tmp_path / "good.o")], "a test file") > 0
    assert (tmp_path / "good.o").is_file()


def test_missing_data_variable_is_named(mvn_program, mvn_data):
    data = {k: v for k, v in mvn_data.items() if k != "Sigma"}
    with pytest.raises(StanDataError, match="Sigma"):
        StanModel(mvn_program, data)


def test_mistyped_data_variable_is_named(mvn_program, mvn_data):
    with pytest.raises(StanDataError, match="N"):
        StanModel(mvn_program, {**mvn_data, "N": 20.5})


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (
            3_000_000_000,
            r"N = 3000000000 \(declared in .*\): beyond Stan's int range, -2147483648 to 2147483647",
        ),
        (-3_000_000_000, r"N = -3000000000 \(declared in .*\): beyond Stan's int range"),
        (float("inf"), r"N = inf \(declared in .*\): an int holds whole numbers, not infinity or NaN"),
        (20.0, r"N = 20.0 \(declared in .*\): given as a real, .* write 20"),
    ],
)
def test_an_int_stan_cannot_read_is_named_with_the_reason(mvn_program, mvn_data, value, why):
    # Stan says only "int variable contained non-int values" of each
    with pytest.raises(StanDataError, match=rf"^data variable {why}"):
        StanModel(mvn_program, {**mvn_data, "N": value})


def test_a_missing_vector_is_called_missing(mvn_program, mvn_data):
    # Stan says "mismatch in number dimensions declared and found ... dims found=()"
    data = {k: v for k, v in mvn_data.items() if k != "mu0"}
    with pytest.raises(
        StanDataError, match=r"^data variable mu0 \(declared in 'mvn_mean.stan', line 13.*\) is missing"
    ):
        StanModel(mvn_program, data)


def test_a_data_file_stan_cannot_read_is_named(mvn_program, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    with pytest.raises(StanDataError) as error:
        StanModel(mvn_program, path)
    assert str(error.value) == f"data file {path}: Error in JSON parsing at offset 0: The document is empty."


def test_misshaped_data_variable_is_named(mvn_program, mvn_data):
    with pytest.raises(StanDataError, match="x") as info:
        StanModel(mvn_program, {**mvn_data, "x": np.zeros((20, 4))})
    assert "has the shape (20,4) in the data, but the program declares (20,3)" in str(info.value)
    assert "D = 3, N = 20" in str(info.value)  # the sizes, set by other data


def test_constraint_violated_in_data_is_reported(mvn_program, mvn_data):
    with pytest.raises(StanDataError, match="beta") as info:
        StanModel(mvn_program, {**mvn_data, "beta": 2.0})
    assert "less than or equal to 1" in str(info.value)


def test_a_value_outside_its_declared_bounds_is_named_in_plain_words(mvn_program, mvn_data, logistic_program):
    # Stan says "Exception: mvn_mean_model_namespace::mvn_mean_model: beta is 2, but must be less than or
    # equal to 1.000000 (in ...)"
    with pytest.raises(StanDataError) as info:
        StanModel(mvn_program, {**mvn_data, "beta": 2.0})
    assert str(info.value).startswith(
        "data variable beta is 2, but must be less than or equal to 1: outside the bounds the program "
        "declares for it (in 'mvn_mean.stan', line 16"
    )
    assert "namespace" not in str(info.value)
    data = generate("logistic", N=6, K=2, seed=1).data
    y = np.array(data["y"])
    y[2] = 3
    with pytest.raises(
        StanDataError, match=r"^data variable y\[3\] is 3, but must be less than or equal to 1: "
    ):
        StanModel(logistic_program, {**data, "y": y})


def test_text_in_the_data_is_named_with_its_entry(mvn_program, mvn_data):
    # Stan says only "Variable: mu0, error: string values not allowed."
    with pytest.raises(
        StanDataError, match=r'^data variable mu0\[2\] = "a" is text, and Stan data are numbers'
    ):
        StanModel(mvn_program, {**mvn_data, "mu0": [0.0, "a", 0.0]})
    with pytest.raises(StanDataError, match=r'^data variable mu0\[1\] = "1.5" is text.*: write 1.5 without'):
        StanModel(mvn_program, {**mvn_data, "mu0": ["1.5", 0.0, 0.0]})
    StanModel(mvn_program, {**mvn_data, "mu0": ["Infinity", "-Inf", "NaN"]})  # the text Stan reads


def test_data_read_from_a_file_name_the_file_in_stans_message(mvn_data, tmp_path):
    path = write_data(tmp_path / "bounds.json", {**mvn_data, "beta": 2.0})
    with pytest.raises(StanDataError, match=rf"^data file {path}: data variable beta is 2, but must be"):
        sample(program_path("mvn_mean"), path, "hmc", progress=False)  # the file reaches Stan as a dict


@pytest.mark.parametrize(
    ("arguments", "error", "said"),
    [
        (
            {"data": [1, 2]},
            TypeError,
            r"data must be a dict of the program's data, .*; not list \(\[1, 2\]\)",
        ),
        ({"seed": -1}, ValueError, r"seed = -1: expected a non-negative integer below 2\*\*32"),
        ({"seed": 1.5}, ValueError, r"seed = 1.5: expected a non-negative integer below 2\*\*32"),
    ],
)
def test_stan_model_arguments_it_cannot_use_are_named(mvn_program, arguments, error, said):
    with pytest.raises(error, match=said):
        StanModel(mvn_program, **arguments)


def test_bad_covariance_in_data_is_reported(mvn_program, mvn_data):
    with pytest.raises(StanDataError, match="Sigma"):
        StanModel(mvn_program, {**mvn_data, "Sigma": -np.eye(3)})


def test_parameter_vector_of_wrong_length_is_refused(mvn_model):
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        mvn_model.log_density(np.zeros(4))
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        mvn_model.log_density_gradient(np.zeros(2))
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        mvn_model.param_constrain(np.zeros((3, 1)))
    with pytest.raises(ValueError, match="expected 3"):
        mvn_model.param_unconstrain(np.zeros(5))


def test_parameter_vector_with_nan_is_refused(mvn_model):
    with pytest.raises(ValueError, match="NaN at index 1"):
        mvn_model.log_density(np.array([0.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="NaN"):
        mvn_model.log_density_gradient(np.array([np.nan, 0.0, 0.0]))


def test_domain_error_in_evaluation(gp_model):
    # An overflowing length scale is outside gp_exp_quad_cov's domain.
    theta = np.array([800.0, 0.0, 0.0, 0.0])
    with pytest.raises(StanDomainError, match="length scale.* is inf") as info:
        gp_model.log_density(theta)
    assert "gp_ard.stan', line" in str(info.value)  # Stan names the program line
    with pytest.raises(StanDomainError, match="length scale.* is inf"):
        gp_model.log_density_gradient(theta)
    # The model is still usable afterwards (the autodiff tape was cleared).
    assert np.isfinite(gp_model.log_density_gradient(np.zeros(gp_model.dim))[0])


def test_reject_in_evaluation(reject_program):
    model = StanModel(reject_program)
    assert model.log_density(np.array([1.0])) == pytest.approx(-0.5)
    with pytest.raises(StanDomainError, match="above the limit 3"):
        model.log_density(np.array([4.0]))
    with pytest.raises(StanDomainError, match="above the limit 3"):
        model.log_density_gradient(np.array([4.0]))
    assert isinstance(StanDomainError("x"), RuntimeError)  # as BridgeStan's errors are
