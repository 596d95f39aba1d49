"""A Stan program's ``print`` statements reach stderr, within a line limit (``stanaccel.stan.prints``)."""

from collections import OrderedDict

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.stan import StanModel, compile_program, prints
from stanaccel.stan import model as model_module
from stanaccel.stan.errors import StanDomainError
from stanaccel.stan.nuts import sample_nuts

PRINTING = """
transformed data {
  print("transformed data: K = ", 3);
}
parameters {
  real mu;
}
model {
  print("model: mu = ", mu);
  if (mu > 10) reject("mu is ", mu, ", above 10");
  mu ~ normal(0, 1);
}
generated quantities {
  real twice = 2 * mu;
  print("generated quantities: twice = ", twice);
}
"""


@pytest.fixture(scope="module")
def printing_program(tmp_path_factory):
    path = tmp_path_factory.mktemp("programs") / "printing.stan"
    path.write_text(PRINTING)
    return compile_program(path)


@pytest.fixture(autouse=True)
def counted_from_zero(monkeypatch):
    monkeypatch.delenv(prints.LINES_VARIABLE, raising=False)
    prints.reset()
    yield
    prints.reset()


@pytest.mark.parametrize("method", ["hmc", "nuts"])
def test_cli_sample_shows_what_every_block_prints(tmp_path, capsys, monkeypatch, printing_program, method):
    monkeypatch.setenv(prints.LINES_VARIABLE, "all")
    monkeypatch.setattr(model_module, "_instances", OrderedDict())  # a new instance, as in a new process
    program = tmp_path / "printing.stan"
    program.write_text(PRINTING)  # the same text: its build comes from the cache
    argv = ["sample", str(program), "--method", method, "--chains", "2", "--warmup", "50", "--draws", "20"]
    code = main([*argv, "-q", "-o", str(tmp_path / "fit.nc")])
    err = capsys.readouterr().err
    assert code == 0, err[-2000:]
    lines = err.splitlines()
    assert "transformed data: K = 3" in lines
    model_lines = [line for line in lines if line.startswith("model: mu = ")]
    assert len(model_lines) > 2 * 20  # at least one gradient per draw
    float(model_lines[-1].removeprefix("model: mu = "))  # the value, as Stan prints it
    assert sum(line.startswith("generated quantities: twice = ") for line in lines) >= 2 * 20
    assert "limited to its first" not in err


def test_only_the_first_lines_show_then_one_note(capsys, monkeypatch, printing_program):
    monkeypatch.setenv(prints.LINES_VARIABLE, "4")
    model = StanModel(printing_program, seed=11)  # a new instance: its transformed data prints
    for mu in np.linspace(-1, 1, 10):
        model.log_density_gradient(np.array([mu]))
    lines = capsys.readouterr().err.splitlines()
    assert lines[:4] == ["transformed data: K = 3", "model: mu = -1", *lines[2:4]]
    assert lines[2].startswith("model: mu = -0.77") and len(lines) == 5
    assert lines[4].startswith("stanaccel: the Stan program's print output is limited to its first 4 lines")
    assert prints.held_back() == 7
    model.log_density(np.array([0.5]))
    assert capsys.readouterr().err == ""  # the note comes once


def test_a_print_before_a_reject_shows_and_the_evaluation_still_fails(capsys, printing_program):
    model = StanModel(printing_program)
    with pytest.raises(StanDomainError, match="mu is 12, above 10"):
        model.log_density(np.array([12.0]))
    assert "model: mu = 12" in capsys.readouterr().err.splitlines()


def test_nuts_shows_its_prints_and_keeps_them_out_of_its_messages(capsys, monkeypatch, printing_program):
    monkeypatch.setenv(prints.LINES_VARIABLE, "0")  # none shown: counted only
    fit = sample_nuts(StanModel(printing_program), chains=2, warmup=30, draws=10, seed=2, progress=False)
    assert capsys.readouterr().err == ""
    assert prints.held_back() >= fit.gradient_evaluations
    assert not [m for chain in fit.messages for m in chain if "mu = " in m]
