"""Tempered transitions (TT; Neal 1996) and, over a subsampled ladder, subsampled TT (STT).

From x = x^_0, up-moves x^_i = T_i(x^_{i-1}) for i = 1..M climb to the
hottest level; then x~_M = x^_M and down-moves x~_{i-1} = T_i(x~_i) for
i = M..1 descend. The end point x~_0 is accepted with probability

    min(1, prod_{i=0}^{M-1} h_{i+1}(x^_i) / h_i(x^_i)
           prod_{i=0}^{M-1} h_i(x~_i) / h_{i+1}(x~_i)),

so every level below the top contributes one ratio at its up-point and one
at its down-point (the paper's "two values at each temperature, one at the
top"). Written out from the reversibility of each T_i, the down-ratio of
level i is taken at the point the level-(i+1) move produced; the n = 1 case
is plain Metropolis-Hastings with the p_1-reversible proposal T_1 T_1.

Exactness needs T_i reversible with respect to h_i (the up- and down-moves
are then each other's reverse): random-walk Metropolis and HMC are. Each
level above the target applies its inner kernel twice per proposal (once
up, once down), 2M inner transitions in all. A TT proposal does not move
within a mode, so workflows cycle it with an inner step at the target
(``Cycle``).

More generally (Wang & Neal, "MCMC using fast approximations", equation 14)
the up-move T^_i and down-move T~_i of a level need only be mutually
reversible for h_i: pi_i(x) T^_i(x'|x) = T~_i(x|x') pi_i(x'). A reversible
kernel is its own partner; a composition S_1 ... S_k of reversible kernels
pairs with S_k ... S_1 (``Cycle.reversed``). ``make_kernel`` may return
such an (up, down) pair. Over a ladder of ever cheaper approximations of an
expensive pi (:func:`~stanaccel.kernels.ladder.approximation_ladder`), a
proposal evaluates pi only at its end point, and the rest of its cost falls
on the approximations; ``summary`` reports evaluations per level.

Statistics live in the state: the counts of proposals and acceptances are a
record in ``State.extra`` (see :mod:`stanaccel.kernels.compose`), so one
kernel shared by several chains reports each chain's own acceptance.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stanaccel.densities import evaluations
from stanaccel.kernels.ladder import Ladder
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.state import (
    Info,
    State,
    added,
    chain_statistics,
    check_start,
    statistics_key,
    with_statistics,
)

EMPTY = {"proposals": 0, "accepts": 0}
"""A chain's statistics record before its first step."""


class TemperedTransitions:
    """TT over a ladder; exact when every inner kernel is reversible for its level.

    Parameters
    ----------
    ladder : Ladder
    make_kernel : callable (density, level) -> kernel, or -> (up kernel, down kernel)
        The transitions of each level (level 0's are not used by the proposal):
        one reversible kernel for both directions, or a mutually reversible pair.

    Attributes
    ----------
    totals : dict
        Proposals and acceptances of every step this kernel object made, all
        chains together (what ``summary()`` without a state reports).
    """

    def __init__(self, ladder: Ladder, make_kernel: Callable):
        self.ladder = ladder
        pairs = [make_kernel(density, m) for m, density in enumerate(ladder.levels)]
        pairs = [p if isinstance(p, tuple) else (p, p) for p in pairs]
        self.kernels = [up for up, _ in pairs]
        self.down_kernels = [down for _, down in pairs]
        self.exact = all(k.exact for k in self.kernels[1:] + self.down_kernels[1:])
        self.densities = ladder.densities
        self.record_key = statistics_key(self)
        self.totals = dict(EMPTY)

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        return check_start(State(position, self.ladder.log_density(0, position)), "TemperedTransitions")

    def log_acceptance(self, state: State, rng: np.random.Generator) -> tuple[float, State]:
        """Run one up-and-down pass; return (log acceptance ratio, proposed state at level 0)."""
        ladder, top = self.ladder, len(self.kernels) - 1
        current, log_ratio = state, 0.0
        for i in range(1, top + 1):  # up: x^_i = T_i(x^_{i-1})
            at_next = ladder.log_density(i, current.position)
            log_ratio += at_next - current.log_density
            current, _ = self.kernels[i].step(State(current.position, at_next), rng)
        for i in range(top, 0, -1):  # down: x~_{i-1} = T~_i(x~_i)
            current, _ = self.down_kernels[i].step(current, rng)
            at_lower = ladder.log_density(i - 1, current.position)
            log_ratio += at_lower - current.log_density
            current = State(current.position, at_lower)
        return log_ratio, current

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        log_ratio, proposal = self.log_acceptance(state, rng)
        accepted, probability = accept(log_ratio, rng)
        counts = {"proposals": 1, "accepts": int(accepted)}
        self.totals = added(self.totals, counts)
        record = added(chain_statistics(state, self.record_key, EMPTY), counts)
        if accepted:
            return with_statistics(proposal, state, self.record_key, record), Info(True, probability)
        info = Info(False, probability, failed=not np.isfinite(log_ratio))
        return with_statistics(state, state, self.record_key, record), info

    def summary(self, state: State | None = None) -> dict:
        """Acceptance of TT proposals and cost per density.

        Parameters
        ----------
        state : State, optional
            A chain's state: the acceptance is that chain's. Without it, the
            acceptance over every step of this kernel object (``totals``).
            ``evaluations_per_density`` counts the densities' evaluations so
            far, whichever chain made them.
        """
        counts = self.totals if state is None else chain_statistics(state, self.record_key, EMPTY)
        return {
            "tt_acceptance": counts["accepts"] / max(counts["proposals"], 1),
            "betas": None if self.ladder.betas is None else self.ladder.betas.tolist(),
            "evaluations_per_density": [evaluations(d) for d in self.ladder.densities],
        }
