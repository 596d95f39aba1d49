"""The records every kernel shares: a State, an Info, and the kernel protocol.

A kernel is a Markov transition: ``init(position) -> State``, then
``step(state, rng) -> (State, Info)``. The State caches what was computed at
the current point (log density, gradient), so a rejected proposal costs no
re-evaluation. Randomness comes only from the ``numpy.random.Generator``
passed to ``step``, so a seed reproduces a run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class State:
    """A point and what is known of the target there.

    ``gradient`` is None until a kernel that needs it computes it (for
    example after a tempering swap moves the point to another level).
    ``extra`` holds what composite kernels keep (replicas of other levels).
    """

    position: np.ndarray
    log_density: float
    gradient: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Info:
    """What one step did.

    Attributes
    ----------
    accepted : bool
        The proposal was accepted.
    acceptance_probability : float
        The Metropolis-Hastings acceptance probability of the proposal.
    divergent : bool
        An HMC trajectory's energy error exceeded the divergence threshold.
    failed : bool
        The density was undefined at the proposal (counted as a rejection).
    details : dict
        Kernel-specific records (swap outcomes, per-level statistics).
    """

    accepted: bool
    acceptance_probability: float
    divergent: bool = False
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Kernel(Protocol):
    """A Markov transition on the unconstrained space of a log density."""

    exact: bool
    """True if the kernel leaves its target exactly invariant."""

    def init(self, position: np.ndarray) -> State: ...

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]: ...
