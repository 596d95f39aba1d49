"""The bundled Stan programs ship inside the package, so an installed wheel finds them by name."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from stanaccel.programs import bundled_programs, program_path

ROOT = Path(__file__).resolve().parents[1]


def test_every_bundled_program_is_found_by_name():
    names = bundled_programs()
    assert {"gp_ard", "gp_ard_lowrank", "gp_density", "logistic", "logistic_latent", "mvn_mean"} <= set(names)
    for name in names:
        assert program_path(name).read_text().strip()
    assert (ROOT / "stan" / "gp_ard.stan").read_text() == program_path("gp_ard").read_text()


def test_unknown_program_names_the_bundled_ones():
    with pytest.raises(FileNotFoundError, match="gp_ard"):
        program_path("no_such_program")


@pytest.mark.slow
def test_the_wheel_carries_the_programs_and_the_bridge(tmp_path):
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the repository
    shutil.copytree(ROOT / "pkg", source / "pkg", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("stanaccel-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"stanaccel/programs/{name}.stan" for name in bundled_programs()}
    assert expected <= names, sorted(expected - names)
    assert "stanaccel/stan/bridge.cpp" in names
