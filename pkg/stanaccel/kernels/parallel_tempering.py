"""Parallel tempering (PT) and, over a subsampled ladder, subsampled PT (SPT).

One replica per level explores with its own inner kernel; then neighbouring
levels propose to swap their points, accepted with probability
min(1, h_n(x_m) h_m(x_n) / (h_n(x_n) h_m(x_m))). Exploration is kept apart
from communication (as in Pigeons.jl). Pairs are chosen deterministically,
even pairs and odd pairs in alternate steps (the non-reversible scheme), or
one random neighbouring pair per step. Only level 0 (the target) is the
chain's draw; the state carries every replica. Statistics (swap acceptance
per pair, round trips of replicas from the target to the top and back)
travel in the state too, so a run is a pure function of its seed.

On a power ladder the state also keeps, after each scan, the log likelihood
at every level's point: the summary's stepping-stone evidence
(:mod:`stanaccel.kernels.evidence`) when the ladder reaches beta = 0, and the
measured round-trip rate beside the theory's
(:mod:`stanaccel.kernels.schedule`, which also adapts the betas). There the
state also keeps evenly spaced points of the beta = 0 level
(:data:`PRIOR_DRAWS`), which say whether that level is proper: an evidence
needs it to be (:func:`~stanaccel.kernels.evidence.evidence_report`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stanaccel.densities import evaluations
from stanaccel.kernels.evidence import stepping_stone
from stanaccel.kernels.ladder import Ladder
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.schedule import limit_rate, round_trip_rate
from stanaccel.kernels.state import Info, State, UndefinedStartError, check_start

PRIOR_DRAWS = 256
"""Points of the beta = 0 level kept per chain, evenly spaced over its scans (between this many and twice
as many: every other one is dropped, and the spacing doubled, when twice as many are held)."""


class ParallelTempering:
    """PT over a ladder; exact (for every level) when the inner kernels are.

    Parameters
    ----------
    ladder : Ladder
    make_kernel : callable (density, level) -> kernel
        The inner kernel of each level.
    swap : "even_odd" or "random"
    """

    def __init__(self, ladder: Ladder, make_kernel: Callable, swap: str = "even_odd"):
        if swap not in ("even_odd", "random"):
            raise ValueError(f"swap must be 'even_odd' or 'random', not {swap!r}")
        self.ladder = ladder
        self.kernels = [make_kernel(density, m) for m, density in enumerate(ladder.levels)]
        self.swap = swap
        self.exact = all(k.exact for k in self.kernels)
        self.densities = ladder.densities
        self.log_likelihood = getattr(ladder, "log_likelihood", None)  # power ladders only
        self.replica_starts: np.ndarray | None = None  # (levels, dim): where init starts levels 1, 2, ...

    def init(self, position: np.ndarray, replicas: np.ndarray | None = None) -> State:
        """The target's replica starts at ``position``; level m >= 1 at ``replicas[m]`` (default
        ``replica_starts``, else ``position``). Each level's density must be defined at its start."""
        replicas = self.replica_starts if replicas is None else replicas
        if replicas is not None and len(replicas) != len(self.kernels):
            raise ValueError(f"{len(replicas)} replica starts for {len(self.kernels)} levels")
        at = [position if replicas is None or m == 0 else replicas[m] for m in range(len(self.kernels))]
        replicas = [self._init_level(m, x) for m, x in enumerate(at)]
        n = len(replicas)
        extra = {
            "replicas": replicas,
            "iteration": 0,
            "walker_at": list(range(n)),  # which walker occupies each level
            "last_end": [0 if m == 0 else (n - 1 if m == n - 1 else -1) for m in range(n)],  # per walker
            "round_trips": 0,
            "swap_attempts": np.zeros(n - 1, dtype=int),
            "swap_accepts": np.zeros(n - 1, dtype=int),
            "level_accepts": np.zeros(n),  # summed shares of each scan's inner moves accepted
        }
        if self.log_likelihood is not None:
            extra["log_likelihood"] = np.array([self.log_likelihood(r.position) for r in replicas])
            extra["log_likelihoods"] = []  # one row per scan: shared and appended to, never copied
            if self.ladder.betas is not None and self.ladder.betas[-1] == 0:
                extra["prior_draws"], extra["prior_spacing"] = [], 1  # shared too
        return self._level_zero(replicas[0], extra)

    def _init_level(self, level: int, position: np.ndarray) -> State:
        """Level ``level``'s replica at ``position``; the error says which level refused it."""
        try:
            replica = self.kernels[level].init(position)
        except UndefinedStartError as error:
            raise UndefinedStartError(f"ParallelTempering level {level}: {error}") from error
        return check_start(replica, f"ParallelTempering level {level} ({type(self.kernels[level]).__name__})")

    @staticmethod
    def _level_zero(replica: State, extra: dict) -> State:
        return State(replica.position, replica.log_density, replica.gradient, extra)

    def pairs(self, iteration: int, rng: np.random.Generator) -> list[int]:
        """Lower levels m of the pairs (m, m+1) proposed this step."""
        n_pairs = len(self.kernels) - 1
        if self.swap == "random":
            return [int(rng.integers(n_pairs))]
        return list(range(iteration % 2, n_pairs, 2))

    def swap_accepted(self, log_ratio: float, rng: np.random.Generator) -> bool:
        """The Metropolis test of a swap: h_n(x_m) h_m(x_n) / (h_n(x_n) h_m(x_m))."""
        return accept(log_ratio, rng)[0]

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        extra = dict(state.extra)
        replicas = list(extra["replicas"])
        for key in ("swap_attempts", "swap_accepts", "level_accepts"):
            extra[key] = extra[key].copy()
        walker_at, last_end = list(extra["walker_at"]), list(extra["last_end"])
        infos = []
        likelihood = self.log_likelihood
        if likelihood is not None:
            extra["log_likelihood"] = extra["log_likelihood"].copy()
        for m, kernel in enumerate(self.kernels):
            before = replicas[m].position
            replicas[m], info = kernel.step(replicas[m], rng)
            extra["level_accepts"][m] += accepted_share(info)
            infos.append(info)
            if likelihood is not None and not np.array_equal(before, replicas[m].position):
                extra["log_likelihood"][m] = likelihood(replicas[m].position)  # cached: just evaluated
        swapped_zero = False
        for m in self.pairs(extra["iteration"], rng):
            low, high = replicas[m], replicas[m + 1]
            low_at_high = self.ladder.log_density(m + 1, low.position)
            high_at_low = self.ladder.log_density(m, high.position)
            accepted = self.swap_accepted(high_at_low + low_at_high - low.log_density - high.log_density, rng)
            extra["swap_attempts"][m] += 1
            if accepted:
                extra["swap_accepts"][m] += 1
                replicas[m] = State(high.position, high_at_low)
                replicas[m + 1] = State(low.position, low_at_high)
                walker_at[m], walker_at[m + 1] = walker_at[m + 1], walker_at[m]
                swapped_zero |= m == 0
                if likelihood is not None:
                    values = extra["log_likelihood"]
                    values[m], values[m + 1] = values[m + 1], values[m]
        top = len(replicas) - 1
        for level in (0, top):
            walker = walker_at[level]
            if level == top and last_end[walker] == 0:
                last_end[walker] = top
            elif level == 0 and last_end[walker] == top:
                last_end[walker] = 0
                extra["round_trips"] += 1
            elif last_end[walker] == -1:
                last_end[walker] = level
        extra.update(
            replicas=replicas, walker_at=walker_at, last_end=last_end, iteration=extra["iteration"] + 1
        )
        if likelihood is not None:
            extra["log_likelihoods"].append(extra["log_likelihood"])
        if "prior_draws" in extra and state.extra["iteration"] % extra["prior_spacing"] == 0:
            kept = extra["prior_draws"]
            kept.append(np.array(replicas[-1].position))
            if len(kept) == 2 * PRIOR_DRAWS:
                del kept[1::2]
                extra["prior_spacing"] *= 2
        base = infos[0]
        info = Info(
            accepted=base.accepted or swapped_zero,
            acceptance_probability=base.acceptance_probability,
            divergent=base.divergent,
            failed=base.failed,
        )
        return self._level_zero(replicas[0], extra), info

    def summary(self, state: State) -> dict:
        """Swap acceptance per neighbouring pair, round trips, inner acceptance and cost per level.

        ``communication_barrier`` is the sum over pairs of the swap rejection
        rates, the estimate of Syed et al. (2021) that Pigeons.jl reports: the
        larger it is, the more levels the ladder needs.
        """
        extra = state.extra
        attempts = np.maximum(extra["swap_attempts"], 1)
        acceptance = extra["swap_accepts"] / attempts
        scans = max(extra["iteration"], 1)
        return {
            "swap_acceptance": acceptance.tolist(),
            "communication_barrier": float(np.sum(1 - acceptance)),
            "round_trips": int(extra["round_trips"]),
            "round_trip_rate": extra["round_trips"] / scans,
            "theoretical_round_trip_rate": round_trip_rate(1 - acceptance),
            "limit_round_trip_rate": limit_rate(float(np.sum(1 - acceptance))),
            **self.evidence(state),
            "inner_acceptance": (extra["level_accepts"] / max(extra["iteration"], 1)).tolist(),
            "betas": None if self.ladder.betas is None else self.ladder.betas.tolist(),
            "evaluations_per_density": [evaluations(d) for d in self.ladder.densities],
            "replicas": [r.position for r in extra["replicas"]],
        }

    def evidence(self, state: State) -> dict:
        """``log_evidence`` (log Z(1) - log Z(0), by stepping stone over this chain's scans),
        ``log_evidence_mcse`` and ``prior_draws`` (the beta = 0 level's kept points, (n, dim)), on a power
        ladder that reaches beta = 0 after 4 scans or more; else nothing. It is the log evidence of the
        program when its beta = 0 density is a normalised prior."""
        rows = state.extra.get("log_likelihoods")
        if not rows or len(rows) < 4 or self.ladder.betas is None or self.ladder.betas[-1] != 0:
            return {}
        log_z, mcse = stepping_stone(self.ladder.betas, np.stack(rows))
        kept = state.extra.get("prior_draws")  # none in a checkpoint written before they were kept
        return {
            "log_evidence": log_z,
            "log_evidence_mcse": mcse,
            **({"prior_draws": np.stack(kept)} if kept else {}),
        }


def accepted_share(info: Info) -> float:
    """The share of a step's moves accepted: of its parts for a cycle of ``inner_steps`` moves."""
    parts = info.details.get("parts") if info.details else None
    return float(np.mean([p.accepted for p in parts])) if parts else float(info.accepted)


def all_levels(state: State) -> np.ndarray:
    """Every level's point, (levels, dim): pass as ``run_chains(..., record=all_levels)``
    to keep the hotter chains too (by default only level 0 is kept)."""
    return np.stack([replica.position for replica in state.extra["replicas"]])
