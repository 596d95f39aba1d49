"""Run one chain of an Ising sampler, keeping traces of summaries, not the spins."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from stanaccel.ising.models import hamming_distance
from stanaccel.results import Result


@dataclass
class IsingRun(Result):
    """A chain of an Ising sampler: traces of summaries, recorded every ``record_every`` steps.

    A :class:`~stanaccel.results.Result` (``to_inference_data()``, ``summary()``,
    ``metrics()``, ``save(path)``): its posterior group holds the traces as one chain.

    Attributes
    ----------
    energy : ndarray (records,)
        The energy trace (the one ESS is computed on).
    magnetisation : ndarray (records,)
        The mean spin.
    hamming_distance : ndarray (records,)
        The number of -1 spins.
    acceptance : float
        Mean acceptance probability over the steps (NaN for no steps).
    seconds : float
        Time of the steps alone.
    steps, record_every : int
    final : ndarray
        The last spins.
    """

    energy: np.ndarray
    magnetisation: np.ndarray
    hamming_distance: np.ndarray
    acceptance: float
    seconds: float
    steps: int
    record_every: int
    final: np.ndarray

    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``: the traces as one chain."""
        traces = {"energy": self.energy, "magnetisation": self.magnetisation,
                  "hamming_distance": self.hamming_distance}  # fmt: skip
        return {
            "posterior": {name: trace[None] for name, trace in traces.items()},
            "attrs": {
                "acceptance": self.acceptance,
                "wall_seconds": self.seconds,
                "steps": self.steps,
                "record_every": self.record_every,
            },  # fmt: skip
        }

    def _metrics_arguments(self) -> dict[str, Any]:
        return {"wall_seconds": self.seconds}


def run_chain(
    kernel, start: np.ndarray, steps: int, rng: np.random.Generator, record_every: int = 1, model=None
) -> IsingRun:
    """Run ``kernel`` for ``steps`` steps from ``start``.

    ``kernel`` is a sampler of this package, or a composition of them (a
    :class:`~stanaccel.kernels.Mixture`) with its ``model`` given.

    The spins of every step would be too many to keep (60x60 spins times
    10^4 steps), so only summaries are recorded, after every
    ``record_every``-th step.

    Returns
    -------
    IsingRun
        The ``energy``, ``magnetisation`` and ``hamming_distance`` traces,
        the mean ``acceptance``, the ``seconds`` of the steps alone and the
        ``final`` spins.
    """
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, not {steps!r}")
    if isinstance(record_every, bool) or not isinstance(record_every, int | np.integer) or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, not {record_every!r}")
    beta = (model or kernel.model).beta
    state = kernel.init(start)
    records = steps // record_every
    energy = np.empty(records)
    magnetisation = np.empty(records)
    distance = np.empty(records, dtype=np.int64)
    acceptance = 0.0
    began = time.perf_counter()
    for t in range(1, steps + 1):
        state, info = kernel.step(state, rng)
        acceptance += info.acceptance_probability
        if t % record_every == 0:
            r = t // record_every - 1
            energy[r] = -state.log_density / beta
            magnetisation[r] = np.mean(state.position)
            distance[r] = hamming_distance(state.position)
    seconds = time.perf_counter() - began
    return IsingRun(
        energy=energy,
        magnetisation=magnetisation,
        hamming_distance=distance,
        acceptance=acceptance / steps if steps else float("nan"),
        seconds=seconds,
        steps=int(steps),
        record_every=int(record_every),
        final=state.position.copy(),
    )
