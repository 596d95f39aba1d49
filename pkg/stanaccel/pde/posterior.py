"""The posterior of the whitened field xi as a stanaccel log density.

log pi(xi) = -0.5 |obs(u(xi)) - data|^2 / sd^2 - 0.5 |xi|^2 (up to a
constant), u(xi) = mean + L xi. It has the interface of a Stan model (``dim``,
``log_density``, ``log_density_gradient -> (lp, grad)``, the evaluation
counters ``n_log_density`` and ``n_gradient``, ``with_data``,
``param_unc_names``), so kernels run on it unchanged and the sampling engine
takes it where it takes a Stan program (:mod:`stanaccel.sampling.pde_target`).
:attr:`likelihood` is the log likelihood alone, the density pCN wants (its
prior in xi is N(0, I)).
"""

from __future__ import annotations

import numpy as np

REMEMBERED = 1_000_000
"""How many log-likelihood values a posterior remembers (by a hash of the point) for its draws' summaries."""


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
        self.beta = 1.0
        self.name = f"elliptic_{solver.n}x{solver.n}_p{solver.degree}"
        self.likelihood = PDELikelihood(self)
        self.remembered: dict[int, float] = {}

    def with_data(self, data: dict | None = None) -> PDEPosterior:
        """A fresh instance (its own counters) of this posterior, tempered when ``data`` sets ``beta``.

        What a Stan model's ``with_data`` is to the sampling engine: each chain
        gets its own instance, and ``{"beta": b}`` gives prior x likelihood^b
        (b = 0: the prior), the tempering family's ladder.
        """
        data = dict(data or {})
        unknown = set(data) - {"beta"}
        if unknown:
            raise ValueError(f"the PDE posterior takes only beta as data, not {sorted(unknown)}")
        copy = object.__new__(PDEPosterior)
        copy.__dict__.update(self.__dict__)
        copy.n_log_density = copy.n_gradient = 0
        copy.beta = float(data.get("beta", self.beta))
        if not copy.beta >= 0:
            raise ValueError(f"beta must be non-negative, not {copy.beta}")
        copy.likelihood = PDELikelihood(copy)
        return copy

    def param_unc_names(self) -> list[str]:
        """``xi.1``, ``xi.2``, ...: the names Stan gives a ``vector[dim] xi`` (the surrogates' parameter)."""
        return [f"xi.{i + 1}" for i in range(self.dim)]

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
        value = -self.solver.misfit(self.field(xi), self.data, self.noise_sd)
        self._remember(xi, value)
        return value

    def log_likelihood_gradient(self, xi: np.ndarray) -> tuple[float, np.ndarray]:
        """The log likelihood and its gradient in xi (one forward, one adjoint solve)."""
        misfit, gradient_u = self.solver.misfit_gradient(self.field(xi), self.data, self.noise_sd)
        self._remember(xi, -misfit)
        return -misfit, -self.prior.pullback(gradient_u)

    def _remember(self, xi: np.ndarray, value: float) -> None:
        # Every draw of an exact kernel is a point where the density was evaluated, so the log
        # likelihood of the draws (a summary every PDE study reports) costs no solve afterwards.
        if len(self.remembered) < REMEMBERED:
            self.remembered[hash(np.asarray(xi, dtype=float).tobytes())] = value

    def recall_log_likelihood(self, xi: np.ndarray) -> float:
        """The log likelihood at xi: remembered from an evaluation there, else solved for."""
        value = self.remembered.get(hash(np.asarray(xi, dtype=float).tobytes()))
        return self.log_likelihood(xi) if value is None else value

    def log_density(self, xi: np.ndarray, propto: bool = True) -> float:
        """log pi(xi) up to a constant (``propto``: Stan's signature; the constants are always dropped)."""
        self.n_log_density += 1
        xi = self.check_point(xi)
        value = self.log_likelihood(xi) if self.beta else 0.0
        return self.beta * value - 0.5 * float(xi @ xi)

    def log_density_gradient(self, xi: np.ndarray, propto: bool = True) -> tuple[float, np.ndarray]:
        self.n_gradient += 1
        xi = self.check_point(xi)
        if not self.beta:
            return -0.5 * float(xi @ xi), -xi
        value, gradient = self.log_likelihood_gradient(xi)
        return self.beta * value - 0.5 * float(xi @ xi), self.beta * gradient - xi


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
