"""The PDE posterior as a target of the sampling engine: what a Stan program and its data are to ``sample``.

The engine's adapter for :mod:`stanaccel.pde`, so it lives with the engine (the PDE package
knows no sampler).

``stanaccel.sampling.sample(PDETarget(posterior), method=...)`` runs every
sampler that needs no Stan program on the PDE posterior, with the same
settings, results and studies as on a Stan program. Three parts differ:

- **Warm-up.** Stan's NUTS warm-up needs a Stan program, so the PDE
  posterior's warm-up is its Laplace approximation: the MAP by L-BFGS with
  adjoint gradients, the Gauss-Newton Hessian's eigenpairs there, and draws
  of N(MAP, (I + H)^-1) as the warm-up draws (the autoencoder of AE-pCN and
  AE-HMC trains on them, and the chains start at them). Its time is charged
  to every sampler, as Stan's warm-up is. The Deep MCMC paper trains its
  autoencoder on Stan warm-up draws; for a posterior without a Stan program
  the Laplace draws are the cheap stand-in (the exact samplers correct
  whatever the autoencoder misses).
- **Summaries.** The draws are reported as the log likelihood, the field's
  mean over the square and the field at the 25 sensors (``log_lik``,
  ``u_mean``, ``u_sensors``), the quantities the PDE studies score, not the
  thousands of whitened coordinates.
- **Approximations.** ``{kind = "coarse", m = 10}`` and ``{kind =
  "linearized"}`` are the Stan surrogates of :mod:`stanaccel.pde.surrogates`
  on the same whitened coordinates, with the enhanced error model estimated
  from Laplace draws (``scale = false`` leaves it out).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from skfem import LinearForm, asm

from stanaccel.approx import KeepConstants
from stanaccel.pde.linearization import draw_laplace, find_map, gauss_newton_hessian
from stanaccel.sampling.config import ConfigError, SamplerConfig
from stanaccel.sampling.methods import method_spec
from stanaccel.sampling.warmup import Adaptation

SURROGATES = ("coarse", "linearized")
ERROR_DRAWS = 200
"""Laplace draws that estimate a surrogate's enhanced error model (its error's mean and covariance)."""


class PDETarget:
    """A :class:`~stanaccel.pde.PDEPosterior` as the sampling engine's target.

    Parameters
    ----------
    posterior : PDEPosterior
    error_draws : int
        Laplace draws for each surrogate's enhanced error model.

    Attributes
    ----------
    laplace : (mean, eigenvalues, eigenvectors) or None
        The Laplace approximation, once :meth:`warm_up` has run.
    approximation_seconds : dict
        Seconds spent building each surrogate (its error model's solves included), by label.
    """

    whitened = True

    def __init__(self, posterior, error_draws: int = ERROR_DRAWS):
        self.posterior = posterior
        self.dim = posterior.dim
        self.name = posterior.name
        self.error_draws = int(error_draws)
        self.laplace = None
        self.hessian = None
        self._error_points = None
        self._surrogate_data: dict[str, dict[str, Any]] = {}
        self.approximation_seconds: dict[str, float] = {}
        solver, prior = posterior.solver, posterior.prior
        weights = asm(LinearForm(lambda v, w: v), solver.basis)
        weights = weights / weights.sum()
        self._mean_map = (float(weights @ prior.mean), prior.pullback(weights))
        sensors = solver.observation
        self._sensor_map = (sensors @ prior.mean, prior.pullback(sensors.T.toarray()).T)

    def __repr__(self) -> str:
        return f"PDETarget({self.posterior!r})"

    def with_data(self, data: dict | None = None):
        """A chain's own instance of the posterior (``{"beta": b}`` tempers it)."""
        return self.posterior.with_data(data)

    def param_unc_names(self) -> list[str]:
        return self.posterior.param_unc_names()

    def check(self, config: SamplerConfig) -> None:
        """Raise a ConfigError for a method or approximation that needs a Stan program."""
        if method_spec(config.method).build is None:  # Stan's NUTS
            raise ConfigError(
                f"method {config.method!r} runs Stan's NUTS and needs a Stan program; the PDE posterior is "
                "not one (use pcn, h-pcn, hmc, ae-pcn, ae-hmc, dc or tt-approx)"
            )
        if "observations" in config.needs:  # a subsampled ladder
            raise ConfigError(
                f"method {config.method!r} subsamples observations; the PDE posterior's 25 sensors are not "
                "declared as observations (use pt or tt, which temper its likelihood by powers)"
            )
        for spec in [getattr(config, "approx", None), *(getattr(config, "ladder", None) or [])]:
            if spec is not None and spec.kind not in SURROGATES:
                raise ConfigError(
                    f"approximation {spec.label}: the PDE posterior's approximations are its Stan "
                    'surrogates, { kind = "coarse", m = 10 } or { kind = "linearized" }'
                )

    def warm_up(self, chains: int, draws: int, seed: int, say=None) -> Adaptation:
        """The Laplace approximation and ``draws`` Laplace draws per chain (see the module notes)."""
        say = say or (lambda line: None)
        start = time.perf_counter()
        say(f"warm-up of {self.name}: MAP by L-BFGS, Gauss-Newton Hessian, Laplace draws")
        posterior = self.posterior.with_data()
        estimate = find_map(posterior)
        hessian = gauss_newton_hessian(posterior, estimate.xi)
        rng = np.random.default_rng(seed)
        warmup_draws = draw_laplace(estimate.xi, hessian, rng, max(chains * draws, chains + 1))
        starts = draw_laplace(estimate.xi, hessian, rng, chains)
        self._error_points = draw_laplace(estimate.xi, hessian, rng, self.error_draws)
        self.laplace = (estimate.xi, hessian.eigenvalues, hessian.eigenvectors)
        self.hessian = hessian
        seconds = time.perf_counter() - start
        say(
            f"MAP in {estimate.iterations} L-BFGS iterations (log density {estimate.log_density:.4g}); "
            f"largest Gauss-Newton eigenvalue {hessian.eigenvalues[0]:.3g}; {seconds:.1f} s"
        )
        # HMC with the identity metric: stable below 2 / sqrt(1 + largest eigenvalue of the Hessian)
        step = float(1 / np.sqrt(1 + hessian.eigenvalues[0]))
        return Adaptation(step, np.ones(self.dim), starts, warmup_draws, seconds, self.laplace, whitened=True)

    def constrain(self, positions: np.ndarray) -> dict[str, np.ndarray]:
        """The draws' summaries: ``log_lik``, ``u_mean`` and ``u_sensors`` (..., 25)."""
        positions = np.asarray(positions, dtype=float)
        flat = positions.reshape(-1, self.dim)
        lead = positions.shape[:-1]
        log_lik = np.array([self.posterior.recall_log_likelihood(x) for x in flat])
        offset, row = self._mean_map
        sensor_offset, sensor_rows = self._sensor_map
        return {
            "log_lik": log_lik.reshape(lead),
            "u_mean": (offset + flat @ row).reshape(lead),
            "u_sensors": (sensor_offset + flat @ sensor_rows.T).reshape(*lead, len(sensor_offset)),
        }

    def approximation(self, spec, seed: int = 0) -> KeepConstants:
        """A chain's own Stan instance of the surrogate ``spec`` (its data built once per target)."""
        from stanaccel.pde.surrogates import SURROGATE_PROGRAM, coarse_surrogate_data, linear_surrogate_data
        from stanaccel.programs import program_path
        from stanaccel.stan import StanModel, compile_program

        if spec.kind not in SURROGATES:
            raise ConfigError(f"approximation {spec.label}: not a PDE surrogate ({', '.join(SURROGATES)})")
        if self.laplace is None:
            raise RuntimeError("a PDE surrogate needs the Laplace approximation: run warm_up first")
        if spec.label not in self._surrogate_data:
            start = time.perf_counter()
            points = self._error_points if spec.scale else None
            if spec.kind == "coarse":
                data = coarse_surrogate_data(self.posterior, spec.m, error_points=points)
            else:
                data = linear_surrogate_data(
                    self.posterior, self.laplace[0], self.hessian.jacobian, error_points=points
                )
            self._surrogate_data[spec.label] = data
            self.approximation_seconds[spec.label] = time.perf_counter() - start
        program = compile_program(program_path(SURROGATE_PROGRAM))
        return KeepConstants(StanModel(program, self._surrogate_data[spec.label]))
