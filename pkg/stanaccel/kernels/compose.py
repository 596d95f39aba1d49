"""Kernel compositions: apply several kernels in turn (each leaves the target invariant).

Kernels that keep no statistics (random-walk Metropolis, HMC, pCN) drop
``State.extra`` when they move; a :class:`Cycle` carries the other kernels'
statistics records (see :mod:`stanaccel.kernels.state`) over such steps.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import kernel_densities
from stanaccel.kernels.state import STATISTICS, Info, State, check_start


class Cycle:
    """Apply ``kernels`` in order each step; exact if every kernel is.

    The kernels must share one target and cache the same quantity in
    ``State.log_density`` (the target's log density), so a state passes
    from one to the next without re-evaluation. The kernels' statistics
    records (``State.extra[STATISTICS]``) pass along too, also through
    kernels that drop ``extra``.
    """

    def __init__(self, kernels: list):
        if not kernels:
            raise ValueError("a cycle needs at least one kernel")
        self.kernels = list(kernels)
        self.exact = all(k.exact for k in self.kernels)
        self.densities = list({id(d): d for k in self.kernels for d in kernel_densities(k)}.values())

    def init(self, position: np.ndarray) -> State:
        """The first kernel's start state, checked here too in case that kernel does not check it."""
        first = self.kernels[0]
        return check_start(first.init(position), f"Cycle (first kernel {type(first).__name__})")

    def reversed(self) -> Cycle:
        """The kernels in reverse order: the reverse of this cycle when each kernel is reversible."""
        return Cycle(self.kernels[::-1])

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        infos = []
        for kernel in self.kernels:
            records = state.extra.get(STATISTICS)
            state, info = kernel.step(state, rng)
            if records is not None and STATISTICS not in state.extra:
                extra = {**state.extra, STATISTICS: records}
                state = State(state.position, state.log_density, state.gradient, extra)
            infos.append(info)
        last = infos[-1]
        return state, Info(
            accepted=any(i.accepted for i in infos),
            acceptance_probability=last.acceptance_probability,
            divergent=any(i.divergent for i in infos),
            failed=any(i.failed for i in infos),
            details={"parts": infos},
        )

    def summary(self, state: State) -> dict:
        """The summaries of the kernels that have one, merged, each from ``state`` alone."""
        out: dict = {}
        for kernel in self.kernels:
            if hasattr(kernel, "summary"):
                out.update(kernel.summary(state))
        return out
