"""The leapfrog integrator, the one HMC and the latent HMC share.

Hamiltonian dynamics for H(q, p) = U(q) + K(p): each step is half a kick
of the momentum by -grad U, a drift of the position by the velocity
dK/dp, and another half kick. The potential may be undefined along the
way (a Stan ``reject``, a point outside the support); the trajectory then
stops, and the caller rejects it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Potential = Callable[[np.ndarray], tuple[float, np.ndarray | None, Any]]
"""q -> (U(q), grad U(q) or None where U is undefined, anything else computed there)."""


@dataclass
class Trajectory:
    """Where a leapfrog trajectory ended.

    Attributes
    ----------
    position, momentum : ndarray
    potential : float
        U at the end (``inf`` where undefined).
    gradient : ndarray or None
        grad U at the end; None if the trajectory stopped at an undefined point.
    extra : Any
        What the potential returned beside U and its gradient, at the end.
    n_steps : int
        Steps taken (fewer than asked if it stopped).
    """

    position: np.ndarray
    momentum: np.ndarray
    potential: float
    gradient: np.ndarray | None
    extra: Any
    n_steps: int

    @property
    def failed(self) -> bool:
        """The potential was undefined at a point of the trajectory."""
        return self.gradient is None


def leapfrog(
    position: np.ndarray,
    momentum: np.ndarray,
    gradient: np.ndarray,
    step_size: float,
    n_steps: int,
    velocity: Callable[[np.ndarray], np.ndarray],
    potential: Potential,
) -> Trajectory:
    """Run ``n_steps`` leapfrog steps from (position, momentum), where grad U is ``gradient``.

    Stops early, with ``gradient`` None, where the potential is undefined.
    """
    q, p, grad = position, momentum - 0.5 * step_size * gradient, gradient
    u, extra = np.inf, None
    for i in range(n_steps):
        q = q + step_size * velocity(p)
        u, grad, extra = potential(q)
        if grad is None:
            return Trajectory(q, p, u, None, extra, i + 1)
        if i < n_steps - 1:
            p = p - step_size * grad
    return Trajectory(q, p - 0.5 * step_size * grad, u, grad, extra, n_steps)
