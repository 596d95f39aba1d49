"""Every subpackage imports on its own, first, in a fresh interpreter: no import cycle hides."""

import subprocess
import sys

import pytest

MODULES = [
    "stanaccel.tuning",
    "stanaccel.ising",
    "stanaccel.kernels",
    "stanaccel.sampling",
    "stanaccel.sampling.tune",
    "stanaccel.workflow",
    "stanaccel.pde",
    "stanaccel.cli",
]


def test_each_subpackage_imports_first():
    script = "import importlib, sys; importlib.import_module(sys.argv[1])"
    failed = {}
    for module in MODULES:
        done = subprocess.run([sys.executable, "-c", script, module], capture_output=True, text=True)
        if done.returncode:
            failed[module] = done.stderr.strip().splitlines()[-1]
    if failed:
        pytest.fail(f"modules that fail to import first: {failed}")
