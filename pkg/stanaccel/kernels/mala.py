"""Preconditioned Metropolis-adjusted Langevin (MALA).

One step proposes from the Langevin diffusion discretised once,
``x' = x + (h^2 / 2) A grad log pi(x) + h A^(1/2) z``, ``z ~ N(0, I)``, with
``A`` a preconditioner (an inverse metric, as Stan reports it: diagonal or
dense), and accepts by Metropolis-Hastings with the proposal's Hastings
correction ``q(x | x') / q(x' | x)``, so the kernel is exact for its target.
The optimal acceptance rate is about 0.574 (Roberts and Rosenthal 1998).

A state that arrives without a gradient (from another kernel) gets it
computed at the next step; where the gradient is undefined there, or at the
proposal, the step is a failed proposal.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import safe_log_density, safe_log_density_gradient
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.pcn import whiten
from stanaccel.kernels.state import Info, State, check_start


class MALA:
    """Metropolis-adjusted Langevin with a preconditioner, exact for its target.

    Parameters
    ----------
    density : log density with a gradient
    step_size : float
        The step h: the proposal's covariance is ``h^2 A``.
    inv_metric : ndarray, optional
        The preconditioner A: (dim,) diagonal or (dim, dim) dense; identity if None.
    """

    exact = True

    def __init__(self, density, step_size: float, inv_metric: np.ndarray | None = None):
        if not step_size > 0:
            raise ValueError(f"need step_size > 0, not {step_size}")
        self.density = density
        self.step_size = float(step_size)
        self.inv_metric = None if inv_metric is None else np.asarray(inv_metric, dtype=float)
        if self.inv_metric is not None and self.inv_metric.ndim == 2:
            self._cholesky = np.linalg.cholesky(self.inv_metric)  # A = L L^T

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        lp, grad = safe_log_density_gradient(self.density, position)
        if grad is None:  # say whether the value or only the gradient is undefined
            lp = safe_log_density(self.density, position)
        return check_start(State(position, lp, grad), "MALA", gradient=True)

    def _precondition(self, v: np.ndarray) -> np.ndarray:
        """A v."""
        if self.inv_metric is None:
            return v
        return self.inv_metric * v if self.inv_metric.ndim == 1 else self.inv_metric @ v

    def _root(self, z: np.ndarray) -> np.ndarray:
        """A^(1/2) z (the Cholesky factor for a dense A)."""
        if self.inv_metric is None:
            return z
        return np.sqrt(self.inv_metric) * z if self.inv_metric.ndim == 1 else self._cholesky @ z

    def _drift(self, state: State) -> np.ndarray:
        """The proposal's mean from ``state``: x + (h^2 / 2) A grad log pi(x)."""
        return state.position + 0.5 * self.step_size**2 * self._precondition(state.gradient)

    def log_proposal(self, to: State, start: State) -> float:
        """log q(to | start), up to a constant that cancels in the Hastings ratio."""
        r = to.position - self._drift(start)
        if self.inv_metric is None:
            w = r
        elif self.inv_metric.ndim == 1:
            w = r / np.sqrt(self.inv_metric)
        else:
            w = whiten(self._cholesky, r)
        return -0.5 * float(w @ w) / self.step_size**2

    def log_hastings(self, state: State, proposal: State) -> float:
        """The Hastings correction log q(x | x') - log q(x' | x)."""
        return self.log_proposal(state, proposal) - self.log_proposal(proposal, state)

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        z = rng.standard_normal(state.position.shape[0])
        if state.gradient is None:
            lp, grad = safe_log_density_gradient(self.density, state.position)
            if grad is None:  # no gradient to follow from here: a failed proposal
                accept(-np.inf, rng)  # the accept uniform, drawn whatever happens
                return state, Info(False, 0.0, failed=True)
            state = State(state.position, lp, grad, state.extra)
        position = self._drift(state) + self.step_size * self._root(z)
        lp, grad = safe_log_density_gradient(self.density, position)
        if grad is None:  # undefined at the proposal: refused
            accept(-np.inf, rng)
            return state, Info(False, 0.0, failed=True)
        proposal = State(position, lp, grad)
        accepted, probability = accept(lp - state.log_density + self.log_hastings(state, proposal), rng)
        info = Info(accepted, probability)
        return (proposal, info) if accepted else (state, info)
