"""Kernel compositions: apply several kernels in turn, or one drawn at random.

Each composition leaves the target invariant when every kernel does: a
:class:`Cycle` applies them in order, a :class:`Mixture` applies one drawn
independently of the state. Kernels that keep no statistics (random-walk
Metropolis, HMC, pCN) drop ``State.extra`` when they move; both compositions
carry the other kernels' statistics records (see
:mod:`stanaccel.kernels.state`) over such steps.
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
            state, info = _step_keeping_records(kernel, state, rng)
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
        return _merged_summaries(self.kernels, state)


class Mixture:
    """Each step, apply one of ``kernels``, drawn with probabilities ``weights``; exact if every kernel is.

    The component is drawn from the generator alone, independently of the
    state, so the step is the weighted average of the components' transition
    kernels, and it leaves the target invariant when each of them does. A
    choice that looked at the state would not. The weights are fixed: the
    mixture does not adapt.

    Parameters
    ----------
    kernels : list of kernels
        Components on one target, caching the same quantity in
        ``State.log_density`` (as for :class:`Cycle`).
    weights : sequence of float
        Non-negative, finite, not all zero, one per kernel; normalised here.
    """

    def __init__(self, kernels: list, weights):
        self.kernels = list(kernels)
        if not self.kernels:
            raise ValueError("a mixture needs at least one kernel")
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (len(self.kernels),):
            raise ValueError(
                f"a mixture needs one weight per kernel: {len(self.kernels)}, not {weights.shape}"
            )
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() == 0:
            raise ValueError(f"mixture weights must be finite, non-negative and not all zero: {weights}")
        self.weights = weights / weights.sum()
        self.exact = all(k.exact for k in self.kernels)
        self.densities = list({id(d): d for k in self.kernels for d in kernel_densities(k)}.values())

    def init(self, position: np.ndarray) -> State:
        """The first kernel's start state, checked here too in case that kernel does not check it."""
        first = self.kernels[0]
        return check_start(first.init(position), f"Mixture (first kernel {type(first).__name__})")

    def choose(self, state: State, rng: np.random.Generator) -> int:
        """The index of the component to apply: drawn by ``weights``, ignoring ``state``."""
        return int(rng.choice(len(self.kernels), p=self.weights))

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        component = self.choose(state, rng)
        state, info = _step_keeping_records(self.kernels[component], state, rng)
        return state, Info(
            accepted=info.accepted,
            acceptance_probability=info.acceptance_probability,
            divergent=info.divergent,
            failed=info.failed,
            details={"component": component, "part": info},
        )

    def summary(self, state: State) -> dict:
        """The summaries of the kernels that have one, merged, each from ``state`` alone."""
        return _merged_summaries(self.kernels, state)


def _step_keeping_records(kernel, state: State, rng: np.random.Generator) -> tuple[State, Info]:
    """One step of ``kernel``, with ``state``'s statistics records put back if the kernel dropped them."""
    records = state.extra.get(STATISTICS)
    state, info = kernel.step(state, rng)
    if records is not None and STATISTICS not in state.extra:
        extra = {**state.extra, STATISTICS: records}
        state = State(state.position, state.log_density, state.gradient, extra)
    return state, info


def _merged_summaries(kernels: list, state: State) -> dict:
    out: dict = {}
    for kernel in kernels:
        if hasattr(kernel, "summary"):
            out.update(kernel.summary(state))
    return out
