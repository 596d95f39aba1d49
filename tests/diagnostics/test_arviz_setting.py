"""Importing stanaccel leaves ArviZ's Numba setting as the user set it; our statistics still work."""

import subprocess
import sys

import pytest

# A fresh interpreter: the user sets ArviZ's Numba flag, imports stanaccel, runs
# the metrics (whose mcse(method="sd") fails on ArviZ's Numba path under NumPy >= 2.4)
# and finds the flag as they set it.
SCRIPT = """
import sys
import numpy as np
import arviz as az

getattr(az.Numba, sys.argv[1])()
wanted = az.Numba.numba_flag
import stanaccel
from stanaccel.diagnostics import convergence_metrics, mcse_z_scores, to_inference_data
assert az.Numba.numba_flag == wanted, "importing stanaccel changed ArviZ's Numba flag"
draws = np.random.default_rng(0).normal(size=(2, 200, 2))
idata = to_inference_data({"posterior": {"x": draws}})
convergence_metrics(idata)
z_mean, z_sd = mcse_z_scores(idata, "x", np.zeros(2), np.ones(2))
assert np.all(np.isfinite(z_sd))
assert az.Numba.numba_flag == wanted, "stanaccel's metrics left ArviZ's Numba flag changed"
print("flag", az.Numba.numba_flag)
"""


@pytest.mark.slow
def test_importing_stanaccel_and_its_metrics_keep_the_users_numba_setting():
    for setting, flag in (("enable_numba", True), ("disable_numba", False)):
        done = subprocess.run([sys.executable, "-c", SCRIPT, setting], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert f"flag {flag}" in done.stdout
