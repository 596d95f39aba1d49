"""The record the stages of ``method = "auto"`` pass along: what every stage needs, and what the shared
warm-up made."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stanaccel.sampling.auto.settings import AutoSettings
from stanaccel.sampling.program import Program
from stanaccel.sampling.warmup import Adaptation
from stanaccel.stan import StanModel


@dataclass
class AutoRun:
    """One ``method = "auto"`` run, from its quick path to its full run.

    The first fields are set once by :func:`~stanaccel.sampling.auto.pipeline.sample_auto`;
    the last three by the shared warm-up (they stay ``None``, 0 and empty
    where no candidate shares it).
    """

    program: Program
    """The user's program (its name names the NUTS pilot's result)."""
    model: StanModel
    """The program compiled on ``data``."""
    data: dict[str, Any]
    auto: AutoSettings
    """The settings, the pilots never longer than the run."""
    seed: int
    seeds: dict[str, int]
    """The run's seeds by job (``spawn_seeds(seed, SEEDS)``): every pilot and the full run share them."""
    progress: bool
    say: Callable[[str], None]
    folder: Path
    """Where the pilots' chains are checkpointed (each in a part of its own), for the full run to continue."""
    checkpoint: Any = None
    """The user's checkpoint folder (None: none)."""
    executor: Any = None
    """Where the full run's chains run (None: here)."""
    start: float = field(default_factory=time.perf_counter)
    """When the run began (``perf_counter``): the seconds since are charged to the result."""
    adaptation: Adaptation | None = None
    """The shared warm-up: its starts, step size and metric, from which every kernel pilot starts."""
    warm_seconds: float = 0.0
    """The shared warm-up's seconds: W of every candidate's score."""
    warm_report: dict[str, Any] = field(default_factory=dict)
    """The shared warm-up's report (its checks, the warm-ups tried, the modes it found)."""

    @property
    def chain_draws(self) -> int:
        """The full run's chains x draws: C x D of the score."""
        return self.auto.chains * self.auto.draws
