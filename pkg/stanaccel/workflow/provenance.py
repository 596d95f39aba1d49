"""Provenance of a workflow run: what ran, with which software, where, from which commit.

Written beside the outputs as ``provenance.json``, so that a result can be
traced to the exact versions, seeds, resolved configuration and machine that
made it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGES = (
    "stanaccel", "httpstan", "pybind11", "numpy", "scipy", "arviz", "xarray", "cmdstanpy",
    "tensorflow-cpu", "keras", "scikit-learn", "polyagamma", "dask", "distributed",
)  # fmt: skip


def versions() -> dict[str, str]:
    """Python's version and each package's (``"not installed"`` where absent)."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def machine() -> dict[str, Any]:
    """The machine: host name, platform, CPU model and cores (usable and present), memory."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = None
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": usable,
        "cores_present": os.cpu_count(),
        "memory_gib": memory,
    }


def git_commit(folder: Path) -> dict[str, Any] | None:
    """The commit checked out in the repository holding ``folder`` and whether it has local
    changes; None outside a repository or without git."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10
        )
        if commit.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "modified": bool(status.stdout.strip())}


def provenance(workflow, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything ``provenance.json`` holds; ``steps`` are the resolved steps (seed and key added)."""
    import stanaccel

    where = workflow.source.parent if workflow.source is not None else Path.cwd()
    return {
        "workflow": workflow.name,
        "source": str(workflow.source) if workflow.source is not None else None,
        "seed": workflow.seed,
        "steps": steps,
        "versions": versions(),
        "git": git_commit(where),
        "stanaccel_git": git_commit(Path(stanaccel.__file__).parent),
        "machine": machine(),
    }
