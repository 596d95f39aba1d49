"""The one Metropolis-Hastings accept step every kernel uses, and random-walk Metropolis."""

from __future__ import annotations

import math

import numpy as np

from stanaccel.densities import safe_log_density
from stanaccel.kernels.state import Info, State, check_start


def accept(log_ratio: float, rng: np.random.Generator) -> tuple[bool, float]:
    """Accept with probability ``min(1, exp(log_ratio))``; return (accepted, probability).

    A NaN or ``-inf`` ratio (undefined density at the proposal) is a rejection.
    The uniform is drawn whatever the ratio, so the random stream does not
    depend on the outcome.
    """
    return decide(log_ratio, rng.random())


def decide(log_ratio: float, u: float) -> tuple[bool, float]:
    """:func:`accept` with its uniform ``u`` drawn beforehand (an independence sampler draws it
    with its proposal, so that a batch of proposals consumes the random stream as single ones do)."""
    if not math.isfinite(log_ratio):
        probability = 1.0 if log_ratio == math.inf else 0.0
    else:
        probability = math.exp(min(0.0, log_ratio))
    return bool(u < probability), probability


class RandomWalkMetropolis:
    """Gaussian random-walk Metropolis: x' = x + scale * L z, z ~ N(0, I).

    Parameters
    ----------
    density : log density
    scale : float
        Proposal standard deviation (times ``cholesky`` if given).
    covariance : ndarray (dim, dim), optional
        Precondition by a covariance (for example from a warm-up); the
        proposal covariance is ``scale**2 * covariance``.
    """

    exact = True

    def __init__(self, density, scale: float = 0.1, covariance: np.ndarray | None = None):
        if scale <= 0:
            raise ValueError(f"scale must be positive, not {scale}")
        self.density = density
        self.scale = float(scale)
        self.cholesky = (
            None if covariance is None else np.linalg.cholesky(np.asarray(covariance, dtype=float))
        )

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        return check_start(State(position, safe_log_density(self.density, position)), "RandomWalkMetropolis")

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        z = rng.standard_normal(state.position.shape[0])
        move = z if self.cholesky is None else self.cholesky @ z
        proposal = state.position + self.scale * move
        lp = safe_log_density(self.density, proposal)
        accepted, probability = accept(lp - state.log_density, rng)
        info = Info(accepted, probability, failed=lp == -np.inf)
        if accepted:
            return State(proposal, lp), info
        return state, info
