"""Mapping to a discretizing chain, with caching (Wang & Neal, "MCMC using fast approximations").

An exact sampler for an expensive density pi that does its moving with a
cheap approximation pi*. Each step maps the current x to a realisation of a
pi*-invariant Markov chain through x, moves a mark along that chain by
Metropolis steps, and returns the marked state:

1. x becomes the marked state x_0 of a chain realisation. Forward states
   x_1, x_2, ... come from the kernel R and backward states x_-1, x_-2, ...
   from its reverse R~(x|x') = R(x'|x) pi*(x) / pi*(x') (R itself when R is
   reversible). A state is simulated only when a mark move first needs it,
   so the chain is in effect infinitely long (the paper's K -> infinity; a
   finite ``chain_length`` K draws the mark uniformly in 0..K-1 instead).
2. ``moves`` times (the paper's r), propose moving the mark ``jump`` steps
   (s) forwards or backwards with equal probability, and accept with
   probability min(1, [pi/pi*](x_new) / [pi/pi*](x_old)) (equation 13).
3. Return the marked state. Every marked state is a valid draw from pi;
   ``State.extra["marked"]`` holds them all (record them with
   :func:`marked_states`).

Every chain state and every pi value is cached for the life of the mapping,
so a mark that returns to a visited time step costs nothing; the cache-hit
count is reported. The pi* state at x (its log density and gradient) is kept
in ``State.extra`` and reused by the next mapping.

Statistics live in the state: the counts of mark moves, acceptances, cache
hits and evaluations of pi are a record in ``State.extra`` (see
:mod:`stanaccel.kernels.compose`), so one kernel shared by several chains
reports each chain's own. The cache itself belongs to one mapping, so it is
never shared either.

With R reversible, r = 1, s = 2k, this is tempered transitions with one
approximation and T^ = T~ = R^k (the paper's equivalence;
``tests/kernels/test_approximations.py`` checks it on a shared realisation).
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import evaluations, kernel_densities, safe_log_density
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.state import (
    Info,
    State,
    UndefinedStartError,
    added,
    chain_statistics,
    check_start,
    statistics_key,
    with_statistics,
)

EMPTY = {
    "mappings": 0,
    "moves": 0,
    "accepted": 0,
    "outside": 0,
    "cache_hits": 0,
    "exact_evaluations": 0,
    "chain_steps": 0,
}
"""A chain's statistics record before its first step."""


class DiscretizingChain:
    """Exact MCMC for ``density`` (pi) moving along chains of a pi*-invariant kernel.

    Parameters
    ----------
    density : log density
        The expensive target pi; only its values are used (no gradient).
    approx_kernel : kernel
        R, leaving the approximation pi* invariant (its ``State.log_density``
        is log pi*). Reversible kernels (random-walk Metropolis, HMC, pCN)
        serve as their own reverse.
    reverse_kernel : kernel, optional
        R~, the reverse of R with respect to pi*, when R is not reversible
        (for a ``Cycle`` of reversible kernels, ``cycle.reversed()``).
    moves : int
        Mark moves per mapping (r).
    jump : int
        Chain steps per mark move (s).
    chain_length : int, optional
        K; None (the default) lets the chain grow as far as the moves need.

    Attributes
    ----------
    totals : dict
        The counts of every step this kernel object made, all chains
        together (what ``summary()`` without a state reports).
    """

    exact = True

    def __init__(
        self,
        density,
        approx_kernel,
        reverse_kernel=None,
        *,
        moves: int = 1,
        jump: int = 1,
        chain_length: int | None = None,
    ):
        if moves < 1 or jump < 1:
            raise ValueError(f"need moves >= 1 and jump >= 1, not {moves} and {jump}")
        if chain_length is not None and chain_length < 1:
            raise ValueError(f"chain_length must be positive, not {chain_length}")
        self.density = density
        self.forward = approx_kernel
        self.backward = approx_kernel if reverse_kernel is None else reverse_kernel
        self.moves, self.jump, self.chain_length = int(moves), int(jump), chain_length
        self.exact = bool(getattr(approx_kernel, "exact", False) and getattr(self.backward, "exact", False))
        approx = kernel_densities(approx_kernel) + kernel_densities(self.backward)
        self.approx_densities = list({id(d): d for d in approx}.values())
        self.densities = [density, *self.approx_densities]
        self.record_key = statistics_key(self)
        self.totals = dict(EMPTY)

    def init(self, position: np.ndarray) -> State:
        """The state at ``position``, where both pi and the approximation pi* must be defined."""
        position = np.array(position, dtype=float)
        state = check_start(State(position, safe_log_density(self.density, position)), "DiscretizingChain")
        try:
            state.extra["approx"] = self.forward.init(position)
        except UndefinedStartError as error:
            raise UndefinedStartError(f"DiscretizingChain, the approximation's kernel: {error}") from error
        return state

    def _approx_state(self, position: np.ndarray) -> State:
        """The pi* state at a point of the chain (mid-run, after another kernel moved it).

        Where pi* is undefined but pi is defined, the pi* state has ``-inf``: the
        weight pi/pi* is then infinite and every mark move is rejected, so the
        step returns the point unchanged rather than stopping the run.
        """
        try:
            return self.forward.init(position)
        except UndefinedStartError:
            return State(np.array(position, dtype=float), -np.inf)

    @staticmethod
    def log_weight(log_pi: float, approx_state: State) -> float:
        """log pi(x) - log pi*(x): a mark move is accepted by the ratio of these weights."""
        return log_pi - approx_state.log_density

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        approx_state = state.extra.get("approx")
        if approx_state is None or not np.array_equal(approx_state.position, state.position):
            approx_state = self._approx_state(state.position)
        chain = {0: approx_state}  # time step -> pi* state of the realised chain
        log_pi = {0: state.log_density}  # time step -> log pi, the cache
        first = last = 0  # the realised time steps so far
        if self.chain_length is None:
            low, high = -np.inf, np.inf
        else:
            k = int(rng.integers(self.chain_length))
            low, high = -k, self.chain_length - 1 - k
        mark, marked, accepted_any, probability = 0, [], False, 1.0
        counts = {**EMPTY, "mappings": 1, "moves": self.moves}
        for _ in range(self.moves):
            target = mark + (self.jump if rng.random() < 0.5 else -self.jump)
            if not low <= target <= high:
                counts["outside"] += 1
                marked.append(chain[mark].position)
                continue
            while last < target:
                chain[last + 1], _ = self.forward.step(chain[last], rng)
                last += 1
            while first > target:
                chain[first - 1], _ = self.backward.step(chain[first], rng)
                first -= 1
            if target in log_pi:
                counts["cache_hits"] += 1
            else:
                log_pi[target] = safe_log_density(self.density, chain[target].position)
                counts["exact_evaluations"] += 1
            log_ratio = self.log_weight(log_pi[target], chain[target]) - self.log_weight(
                log_pi[mark], chain[mark]
            )
            accepted, probability = accept(log_ratio, rng)
            if accepted:
                mark, accepted_any = target, True
                counts["accepted"] += 1
            marked.append(chain[mark].position)
        counts["chain_steps"] = last - first
        self.totals = added(self.totals, counts)
        record = added(chain_statistics(state, self.record_key, EMPTY), counts)
        new = State(chain[mark].position, log_pi[mark], extra={"approx": chain[mark], "marked": marked})
        info = Info(accepted_any, probability, details={"mark": mark, "chain_steps": last - first})
        return with_statistics(new, state, self.record_key, record), info

    def summary(self, state: State | None = None) -> dict:
        """Mark-move acceptance, cache hits, and evaluations of pi and pi*.

        Parameters
        ----------
        state : State, optional
            A chain's state: the counts are that chain's. Without it, the
            counts of every step of this kernel object (``totals``).
            ``evaluations_per_density`` counts the densities' evaluations so
            far, whichever chain made them.
        """
        c = self.totals if state is None else chain_statistics(state, self.record_key, EMPTY)
        exact_needed = c["exact_evaluations"] + c["cache_hits"]
        return {
            "move_acceptance": c["accepted"] / max(c["moves"], 1),
            "cache_hit_fraction": c["cache_hits"] / max(exact_needed, 1),
            "exact_evaluations": c["exact_evaluations"],
            "cache_hits": c["cache_hits"],
            "chain_steps": c["chain_steps"],
            "moves_outside_chain": c["outside"],
            "evaluations_per_density": [evaluations(d) for d in self.densities],
        }


def marked_states(state: State) -> np.ndarray:
    """Every marked state of the last mapping, (moves, dim): a ``record`` for ``run_chains``."""
    return np.array(state.extra["marked"])
