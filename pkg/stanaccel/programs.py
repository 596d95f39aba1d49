"""The Stan programs that ship with stanaccel (the repository's ``stan/`` folder)."""

from __future__ import annotations

import os
from pathlib import Path

PROGRAMS_ENV = "STANACCEL_PROGRAMS"


def programs_dir() -> Path:
    """The folder of bundled ``.stan`` files (``$STANACCEL_PROGRAMS`` overrides)."""
    if os.environ.get(PROGRAMS_ENV):
        return Path(os.environ[PROGRAMS_ENV])
    return Path(__file__).resolve().parents[2] / "stan"


def program_path(name: str) -> Path:
    """Path of a bundled program by name, e.g. ``program_path("gp_ard")``."""
    path = programs_dir() / f"{name.removesuffix('.stan')}.stan"
    if not path.is_file():
        available = sorted(p.stem for p in programs_dir().glob("*.stan"))
        raise FileNotFoundError(f"no bundled Stan program {name!r} in {programs_dir()}; have {available}")
    return path
