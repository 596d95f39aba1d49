"""The simulated data of ``benchmarks/stochastic_volatility.py`` (imported by its path, as
``posteriordb.py`` is in ``test_posteriordb_scoring.py``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stochastic_volatility.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmark_stochastic_volatility", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


sv = _load()


def test_simulated_data_are_reproducible_and_written_as_stan_json(tmp_path):
    """The same returns every time (the reference draws cached in a work folder stay valid), T of them,
    and ``prepare`` writes exactly those with the program."""
    first, second = sv.simulate(), sv.simulate()
    assert first == second
    assert first["T"] == sv.T == len(first["y"])
    y = np.asarray(first["y"])
    assert np.all(np.isfinite(y)) and 0.3 < np.std(y) < 1.5  # exp(h / 2) with stationary mean -1
    program, data = sv.prepare(tmp_path)
    assert program.read_text() == sv.PROGRAM
    assert json.loads(data.read_text()) == first
    assert len(sv.parameter_names()) == sv.T + 3
