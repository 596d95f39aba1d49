"""Every subpackage imports on its own, first, with no stanaccel module loaded: no import cycle hides."""

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


FIRST_IMPORTS = """
import importlib, os, sys, traceback

import numpy, scipy.linalg, scipy.optimize, scipy.special, scipy.stats

assert not [m for m in sys.modules if m.split(".")[0] == "stanaccel"]
for module in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(module)
        except BaseException:
            print(module, traceback.format_exc().strip().splitlines()[-1], flush=True)
            os._exit(1)
        os._exit(0)
    if status := os.waitpid(pid, 0)[1]:
        print(module, "exit status", status, flush=True)
"""
"""One interpreter imports NumPy and SciPy, which stanaccel neither configures nor imports in a
particular order; then each module is imported first in a fork of it, with no stanaccel module
loaded. Half the CPU of an interpreter per module (6 CPU-s against 12)."""


@pytest.mark.slow
def test_each_subpackage_imports_first():
    done = subprocess.run([sys.executable, "-c", FIRST_IMPORTS, *MODULES], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip():
        pytest.fail(f"modules that fail to import first:\n{done.stdout}")


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


def test_a_module_of_the_workflow_package_imports_no_heavy_package():
    # pytest's settings name stanaccel.workflow.cache's warning, so every pytest run imports it: the
    # package's exports (the runner, ArviZ, Numba) load only when read.
    script = (
        "import sys\nimport stanaccel.workflow.cache\n"
        f"print('imported:', *(m for m in {HEAVY + ('stanaccel.workflow.runner',)!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout[-300:]


def test_lazy_exports_are_the_modules_own_and_listed():
    import stanaccel.workflow
    from stanaccel.workflow import runner

    assert "run_workflow" in dir(stanaccel.workflow)
    assert stanaccel.workflow.run_workflow is runner.run_workflow
    with pytest.raises(AttributeError, match="module 'stanaccel.workflow' has no attribute 'no_such'"):
        stanaccel.workflow.no_such  # noqa: B018
