"""The posterior of the whitened field xi as a stanaccel log density.

log pi(xi) = -0.5 |obs(u(xi)) - data|^2 / sd^2 - 0.5 |xi|^2 (up to a
constant), u(xi) = mean + L xi. It has the interface of a Stan model (``dim``,
``log_density``, ``log_density_gradient -> (lp, grad)``, the evaluation
counters ``n_log_density`` and ``n_gradient``), so kernels run on it
unchanged. :attr:`likelihood` is the log likelihood alone, the density pCN
wants (its prior in xi is N(0, I)).
"""

from __future__ import annotations

import numpy as np


class PDEPosterior:
    """Posterior of the log-transmissivity in whitened coordinates.

    Parameters
    ----------
    solver : EllipticSolver
    prior : ExponentialPrior, BiLaplacianPrior, or another whitened prior (``dim``, ``field``, ``pullback``)
    data : ndarray
        Observations at the solver's sensors.
    noise_sd : float
    """

    def __init__(self, solver, prior, data: np.ndarray, noise_sd: float):
        if prior.dim != solver.dim:
            raise ValueError(f"the prior has {prior.dim} nodal values but the mesh has {solver.dim}")
        data = np.asarray(data, dtype=float)
        if data.shape != (len(solver.sensors),):
            raise ValueError(
                f"data must be {len(solver.sensors)} observations, one per sensor, not {data.shape}"
            )
        if not noise_sd > 0:
            raise ValueError(f"the noise standard deviation must be positive, not {noise_sd}")
        self.solver, self.prior, self.data, self.noise_sd = solver, prior, data, float(noise_sd)
        self.dim = solver.dim
        self.n_log_density = 0
        self.n_gradient = 0
        self.likelihood = PDELikelihood(self)

    def __repr__(self) -> str:
        s = self.solver
        return f"PDEPosterior({s.n}x{s.n} P{s.degree}, dim={self.dim}, noise_sd={self.noise_sd:.3g})"

    def check_point(self, xi: np.ndarray) -> np.ndarray:
        """xi as a float vector of length ``dim``, or a ValueError naming the lengths."""
        xi = np.asarray(xi, dtype=float)
        if xi.shape != (self.dim,):
            raise ValueError(f"xi must be a vector of length {self.dim}, not shape {xi.shape}")
        return xi

    def field(self, xi: np.ndarray) -> np.ndarray:
        """The log-transmissivity u at the nodes for whitened coordinates xi."""
        return self.prior.field(self.check_point(xi))

    def log_likelihood(self, xi: np.ndarray) -> float:
        """-0.5 |obs - data|^2 / sd^2 (one forward solve)."""
        return -self.solver.misfit(self.field(xi), self.data, self.noise_sd)

    def log_likelihood_gradient(self, xi: np.ndarray) -> tuple[float, np.ndarray]:
        """The log likelihood and its gradient in xi (one forward, one adjoint solve)."""
        misfit, gradient_u = self.solver.misfit_gradient(self.field(xi), self.data, self.noise_sd)
        return -misfit, -self.prior.pullback(gradient_u)

    def log_density(self, xi: np.ndarray) -> float:
        self.n_log_density += 1
        xi = self.check_point(xi)
        return self.log_likelihood(xi) - 0.5 * float(xi @ xi)

    def log_density_gradient(self, xi: np.ndarray) -> tuple[float, np.ndarray]:
        self.n_gradient += 1
        xi = self.check_point(xi)
        value, gradient = self.log_likelihood_gradient(xi)
        return value - 0.5 * float(xi @ xi), gradient - xi


class PDELikelihood:
    """The log likelihood of a :class:`PDEPosterior` as a density of its own, with its own counters.

    For pCN: ``PCN(posterior.likelihood, mean=zeros, covariance=identity)``.
    """

    def __init__(self, posterior: PDEPosterior):
        self.posterior = posterior
        self.dim = posterior.dim
        self.n_log_density = 0
        self.n_gradient = 0

    def log_density(self, xi: np.ndarray) -> float:
        self.n_log_density += 1
        return self.posterior.log_likelihood(xi)

    def log_density_gradient(self, xi: np.ndarray) -> tuple[float, np.ndarray]:
        self.n_gradient += 1
        return self.posterior.log_likelihood_gradient(xi)
