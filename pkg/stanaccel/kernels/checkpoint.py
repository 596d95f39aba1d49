"""Checkpoints of kernel chains: everything needed to continue a chain exactly.

A long run must survive Ctrl-C, a kill or a crash, and continue to the same
draws as a run that was never stopped. A kernel chain is fully described by
its :class:`~stanaccel.kernels.state.State` (position, cached log density and
gradient, ``extra``: replicas, approximate-chain states, statistics), the
state of its ``numpy.random.Generator``, and what it has kept so far (draws,
per-draw statistics, counters); a :class:`ChainCheckpoint` holds all of it.

Each chain has one file, ``chain-<c>.pkl`` in the checkpoint folder, written
atomically (a temporary file, then ``os.replace``), so a kill while writing
leaves the previous checkpoint whole, with its size and SHA-256 in a manifest
beside it (``chain-<c>.pkl.json``, written last); a checkpoint that does not
match its manifest is damaged and not resumed from. The file is a pickle (``State.extra``
holds nested states and arrays of any kind): load checkpoints only from
folders you wrote.

A run's :func:`fingerprint` (chains, draws, thin, dimension, seed, kernel
name, start points) is stored with each checkpoint; a checkpoint of another
run is not resumed from.

Statistics records in ``State.extra`` are keyed by kernel objects' private
keys, which name a serial number of the process (``statistics_key``); a
checkpoint stores them by the kernel's place in the composition instead
(:func:`record_keys`), and a resumed run maps them to its own kernels' keys.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import read_checked_pickle, write_checkpoint
from stanaccel.kernels.state import STATISTICS, State

FORMAT = 1
"""Version of the checkpoint layout; a file of another version is not resumed from."""


@dataclass
class ChainCheckpoint:
    """One chain's progress: its state, its generator's state and what it has kept.

    Attributes
    ----------
    fingerprint : dict
        The run's :func:`fingerprint`.
    done : int
        Kept draws so far.
    state : State
        The chain's state after its last kept draw.
    rng_state : dict
        ``Generator.bit_generator.state`` after its last kept draw.
    positions : ndarray (done, dim)
    statistics : dict of ndarray (done,)
        ``acc``, ``p``, ``div``, ``fail`` of each kept draw.
    recorded : list
        What ``record`` returned for each kept draw.
    failed_proposals, failures_in_a_row : int
        Failed steps in all, and in a row at the end (for the stuck-chain warning).
    warned : bool
        The stuck-chain warning was given.
    evaluations : int
        Density evaluations of the segments run so far.
    seconds : float
        The chain's wall time over the segments run so far: what a resumed
        run is charged for the draws it takes from the checkpoint.
    """

    fingerprint: dict[str, Any]
    done: int
    state: State
    rng_state: dict[str, Any]
    positions: np.ndarray
    statistics: dict[str, np.ndarray]
    recorded: list = field(default_factory=list)
    failed_proposals: int = 0
    failures_in_a_row: int = 0
    warned: bool = False
    evaluations: int = 0
    seconds: float = 0.0
    format: int = FORMAT


def fingerprint(
    *, chains: int, n_draws: int, thin: int, dim: int, seed: int, kernel: str, starts: np.ndarray
) -> dict[str, Any]:
    """What makes a run's draws: a checkpoint resumes only a run with the same.

    The start points enter as a CRC of their bytes, so a different warm-up
    (which gives different starts) is not mistaken for the same run. Kernel
    settings other than the name are not in it: a caller that changes them
    uses a fresh checkpoint folder (the workflow runner does).
    """
    starts = np.ascontiguousarray(starts, dtype=float)
    return {
        "chains": int(chains),
        "n_draws": int(n_draws),
        "thin": int(thin),
        "dim": int(dim),
        "seed": int(seed),
        "kernel": str(kernel),
        "starts": zlib.crc32(starts.tobytes()),
    }


def chain_path(folder: Path, chain: int) -> Path:
    """The checkpoint file of ``chain`` in ``folder``."""
    return Path(folder) / f"chain-{chain}.pkl"


def record_keys(kernel) -> list[str]:
    """The statistics keys of ``kernel`` and the kernels inside it, in a fixed order.

    Walks the attributes of each kernel (in the order the constructor set
    them) into kernels and lists of kernels; the order depends on how the
    composition is built, not on serial numbers, so two builds of the same
    composition give their keys in the same order.
    """
    keys: list[str] = []
    seen: set[int] = set()

    def walk(obj) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        key = getattr(obj, "record_key", None)
        if isinstance(key, str):
            keys.append(key)
        for value in vars(obj).values() if hasattr(obj, "__dict__") else ():
            for item in value if isinstance(value, list | tuple) else (value,):
                if hasattr(item, "step") and hasattr(item, "init"):
                    walk(item)

    walk(kernel)
    return keys


def _rekeyed(state: State, mapping: dict[str, str]) -> State:
    """``state`` with its statistics records' keys (and those of nested states) renamed by ``mapping``."""

    def rename(value):
        if isinstance(value, State):
            return _rekeyed(value, mapping)
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    extra = {k: rename(v) for k, v in state.extra.items()}
    if STATISTICS in extra:
        extra[STATISTICS] = {mapping.get(k, k): v for k, v in extra[STATISTICS].items()}
    return replace(state, extra=extra)


def save(folder: Path, chain: int, checkpoint: ChainCheckpoint, kernel) -> None:
    """Write ``checkpoint`` of ``chain`` atomically, its statistics keys made portable."""
    portable = {key: f"#{i}" for i, key in enumerate(record_keys(kernel))}
    checkpoint = replace(checkpoint, state=_rekeyed(checkpoint.state, portable))
    write_checkpoint(chain_path(folder, chain), checkpoint)


def load(folder: Path, chain: int, expected: dict[str, Any], kernel) -> ChainCheckpoint | str | None:
    """The checkpoint of ``chain`` in ``folder`` if it belongs to the run ``expected``.

    Returns None where there is none, and a sentence saying why where the
    file is of another run, unreadable, or damaged (it does not match its
    manifest); the caller starts that chain afresh.
    """
    path = chain_path(folder, chain)
    if not path.is_file():
        return None
    try:
        checkpoint = read_checked_pickle(path)
    except ValueError as error:
        return str(error)
    if not isinstance(checkpoint, ChainCheckpoint) or checkpoint.format != FORMAT:
        return f"{path} is not a stanaccel chain checkpoint of this version"
    if checkpoint.fingerprint != expected:
        differ = sorted(k for k in expected if checkpoint.fingerprint.get(k) != expected[k])
        return f"{path} is of another run (it differs in {', '.join(differ)})"
    local = {f"#{i}": key for i, key in enumerate(record_keys(kernel))}
    return replace(checkpoint, state=_rekeyed(checkpoint.state, local))
