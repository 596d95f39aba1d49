"""Shared fixtures: the bundled Stan programs, compiled once per machine (cached)."""

import signal

import pytest

from stanaccel.datasets import generate
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program

# A program with a `reject` and a `print`: the error paths of evaluation.
REJECT_PROGRAM = """
parameters {
  real y;
}
model {
  if (y > 3) reject("y is ", y, ", above the limit 3");
  y ~ normal(0, 1);
}
"""


@pytest.fixture(scope="session")
def mvn_program():
    return compile_program(program_path("mvn_mean"))


@pytest.fixture(scope="session")
def gp_program():
    return compile_program(program_path("gp_ard"))


@pytest.fixture(scope="session")
def logistic_program():
    return compile_program(program_path("logistic"))


@pytest.fixture(scope="session")
def logistic_latent_program():
    return compile_program(program_path("logistic_latent"))


@pytest.fixture(scope="session")
def reject_program():
    return compile_program(REJECT_PROGRAM)


@pytest.fixture(scope="session")
def mvn_data():
    return generate("mvn_mean", N=20, D=3, seed=7).data


@pytest.fixture(scope="session")
def mvn_model(mvn_program, mvn_data):
    return StanModel(mvn_program, mvn_data)


@pytest.fixture(scope="session")
def gp_data():
    return generate("gp_ard", N=24, D=2, seed=3).data


@pytest.fixture(scope="session")
def gp_model(gp_program, gp_data):
    return StanModel(gp_program, gp_data)


@pytest.fixture(scope="session")
def logistic_model(logistic_program):
    return StanModel(logistic_program, generate("logistic", N=60, K=3, seed=5).data)


@pytest.fixture
def sigint_handled():
    """Python's own Ctrl-C handler, for tests that interrupt a run.

    A shell that starts a command in the background makes it ignore SIGINT,
    and Python then never installs its handler (``_thread.interrupt_main``
    would do nothing); set it for the test and restore what was there.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
