"""Hamiltonian Monte Carlo with a fixed step size and number of leapfrog steps.

The step size and the number of steps can be jittered (drawn afresh each
step, independently of the state), which keeps the kernel reversible. The
metric is diagonal or dense, given as its inverse (as Stan reports it).

A leapfrog step needs the gradient. ``init`` refuses a start point without
one (:class:`~stanaccel.kernels.state.UndefinedStartError`); a state that
arrives without a gradient from another kernel (a tempering swap, a cycle)
gets it computed at the next step, and where it is undefined there the step
is a failed proposal, like a trajectory that leaves the support.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import safe_log_density, safe_log_density_gradient
from stanaccel.kernels.integrator import leapfrog
from stanaccel.kernels.state import Info, State, check_start

DIVERGENCE = 1000.0  # energy error (nats) beyond which a trajectory counts as divergent, as in Stan


class HMC:
    """Hamiltonian Monte Carlo, exact for its target.

    Parameters
    ----------
    density : log density with a gradient
    step_size : float
    n_steps : int
        Leapfrog steps per proposal.
    inv_metric : ndarray, optional
        Inverse metric: (dim,) diagonal or (dim, dim) dense; identity if None.
    step_size_jitter : float in [0, 1)
        Each step size is drawn uniformly from ``step_size * (1 +- jitter)``.
    n_steps_jitter : float in [0, 1)
        Each number of steps is drawn uniformly from
        ``[ceil(n_steps * (1 - jitter)), n_steps]``.
    """

    exact = True

    def __init__(
        self,
        density,
        step_size: float,
        n_steps: int,
        inv_metric: np.ndarray | None = None,
        step_size_jitter: float = 0.0,
        n_steps_jitter: float = 0.0,
    ):
        if step_size <= 0 or n_steps < 1:
            raise ValueError(f"need step_size > 0 and n_steps >= 1, not {step_size} and {n_steps}")
        if not (0 <= step_size_jitter < 1 and 0 <= n_steps_jitter < 1):
            raise ValueError("jitters must be in [0, 1)")
        self.density = density
        self.step_size = float(step_size)
        self.n_steps = int(n_steps)
        self.step_size_jitter = float(step_size_jitter)
        self.n_steps_jitter = float(n_steps_jitter)
        self.inv_metric = None if inv_metric is None else np.asarray(inv_metric, dtype=float)
        if self.inv_metric is not None and self.inv_metric.ndim == 2:
            # p ~ N(0, M) with M = inv_metric^-1: p = chol(M) z.
            self._metric_cholesky = np.linalg.cholesky(np.linalg.inv(self.inv_metric))

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        lp, grad = safe_log_density_gradient(self.density, position)
        if grad is None:  # say whether the value or only the gradient is undefined
            lp = safe_log_density(self.density, position)
        return check_start(State(position, lp, grad), "HMC", gradient=True)

    def _momentum(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        z = rng.standard_normal(dim)
        if self.inv_metric is None:
            return z
        if self.inv_metric.ndim == 1:
            return z / np.sqrt(self.inv_metric)
        return self._metric_cholesky @ z

    def _velocity(self, p: np.ndarray) -> np.ndarray:
        if self.inv_metric is None:
            return p
        return self.inv_metric * p if self.inv_metric.ndim == 1 else self.inv_metric @ p

    def _potential(self, q: np.ndarray) -> tuple[float, np.ndarray | None, None]:
        """U = -log density and its gradient; None where the density is undefined."""
        lp, grad = safe_log_density_gradient(self.density, q)
        return -lp, (None if grad is None else -grad), None

    def _kinetic(self, p: np.ndarray) -> float:
        return 0.5 * float(p @ self._velocity(p))

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        dim = state.position.shape[0]
        p = self._momentum(rng, dim)
        epsilon = self.step_size * (1 + self.step_size_jitter * (2 * rng.random() - 1))
        low = int(np.ceil(self.n_steps * (1 - self.n_steps_jitter)))
        n_steps = int(rng.integers(low, self.n_steps + 1)) if low < self.n_steps else self.n_steps
        u = rng.random()  # the accept uniform, drawn up front so the stream is outcome-independent
        if state.gradient is None:
            lp, grad = safe_log_density_gradient(self.density, state.position)
            if grad is None:  # no gradient to follow from here: a failed proposal
                return state, Info(False, 0.0, failed=True, details={"n_steps": 0})
            state = State(state.position, lp, grad, state.extra)

        h0 = -state.log_density + self._kinetic(p)
        end = leapfrog(state.position, p, -state.gradient, epsilon, n_steps, self._velocity, self._potential)
        if end.failed:  # the program rejected a point on the way (a reject, a domain error): not a divergence
            return state, Info(False, 0.0, failed=True, details={"n_steps": end.n_steps})
        q, lp, grad = end.position, -end.potential, -end.gradient
        energy_error = end.potential + self._kinetic(end.momentum) - h0
        divergent = bool(not np.isfinite(energy_error) or energy_error > DIVERGENCE)
        probability = float(np.exp(min(0.0, -energy_error))) if np.isfinite(energy_error) else 0.0
        details = {"n_steps": n_steps, "energy_error": energy_error}
        if u < probability:
            return State(q, lp, grad), Info(True, probability, divergent, details=details)
        return state, Info(False, probability, divergent, details=details)
