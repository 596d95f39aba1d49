"""The Stan programs that ship with stanaccel, inside the package.

They install with the package, so ``program_path("gp_ard")`` finds them in a
wheel as in a clone (whose top-level ``stan/`` folder links here).
"""

from __future__ import annotations

import os
from pathlib import Path

PROGRAMS_ENV = "STANACCEL_PROGRAMS"


def programs_dir() -> Path:
    """The folder of bundled ``.stan`` files (``$STANACCEL_PROGRAMS`` overrides)."""
    if os.environ.get(PROGRAMS_ENV):
        return Path(os.environ[PROGRAMS_ENV])
    return Path(__file__).resolve().parent


def bundled_programs() -> list[str]:
    """The names of the bundled programs, sorted."""
    return sorted(p.stem for p in programs_dir().glob("*.stan"))


def program_path(name: str) -> Path:
    """Path of a bundled program by name, e.g. ``program_path("gp_ard")``."""
    path = programs_dir() / f"{name.removesuffix('.stan')}.stan"
    if not path.is_file():
        raise FileNotFoundError(
            f"no bundled Stan program {name!r} in {programs_dir()}; have {bundled_programs()}"
        )
    return path
