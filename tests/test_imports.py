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


@pytest.mark.slow
def test_each_subpackage_imports_first():
    script = "import importlib, sys; importlib.import_module(sys.argv[1])"
    failed = {}
    for module in MODULES:
        done = subprocess.run([sys.executable, "-c", script, module], capture_output=True, text=True)
        if done.returncode:
            failed[module] = done.stderr.strip().splitlines()[-1]
    if failed:
        pytest.fail(f"modules that fail to import first: {failed}")


HEAVY = ("arviz", "scipy.stats", "matplotlib", "xarray", "tensorflow", "dask", "stanaccel.sampling.engine")
"""What a command's help and argument errors never import: they answer in well under a second."""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["sample", "--help"],
        ["nuts", "--help"],
        ["sample", "x.stan", "--method", "no-such-method"],
    ],
)
def test_the_command_lines_help_and_argument_errors_import_no_heavy_package(argv):
    script = (
        "import sys\nfrom stanaccel.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print('imported:', *(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout[-300:]
