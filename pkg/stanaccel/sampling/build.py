"""Kernels for a posterior from a resolved sampler configuration: the one kernel factory.

Every method builds its kernels here, for ``stanaccel sample``, the ``sample``
workflow step and the studies alike. A factory makes one kernel per chain,
each with Stan instances of its own, so chains run in parallel threads and
count their own cost; it records each chain's densities (``factory.densities``)
so that a caller can report the cost of pi and of each approximation.
Which parts make a method's kernel is the method's ``build`` in the table
of methods (:mod:`stanaccel.sampling.methods`); the parts are here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.approx import KeepConstants
from stanaccel.kernels import (
    HMC,
    Cycle,
    DiscretizingChain,
    ParallelTempering,
    RandomWalkMetropolis,
    TemperedTransitions,
    approximation_ladder,
    geometric_betas,
    power_ladder,
    subsampled_ladder,
)
from stanaccel.kernels.hessian_pcn import HessianPCN
from stanaccel.kernels.pcn import PosteriorPCN, gaussian_root
from stanaccel.sampling.config import ConfigError, SamplerConfig, method_record
from stanaccel.sampling.program import approximation, approximation_specs, observations_for
from stanaccel.sampling.warmup import Adaptation
from stanaccel.stan import StanModel, compile_program


def mh_move(
    config: SamplerConfig,
    density,
    adaptation: Adaptation,
    beta: float = 1.0,
    step: float | None = None,
    factor: float = 1.0,
):
    """Random-walk Metropolis on ``density`` at inverse temperature ``beta`` (see :func:`_widen`), its scale
    multiplied by ``factor`` (a tempering level's adapted factor)."""
    covariance = adaptation.covariance if config.precondition else None
    scale = config.scale * factor * _widen(config, beta, ("both", "mh"))
    return _repeated(config, RandomWalkMetropolis(density, scale=scale, covariance=covariance))


def hmc_move(
    config: SamplerConfig,
    density,
    adaptation: Adaptation,
    beta: float = 1.0,
    step: float | None = None,
    factor: float = 1.0,
):
    """HMC on ``density`` at inverse temperature ``beta`` (see :func:`_widen`), with ``step`` (default:
    ``step_size``) multiplied by ``factor`` (a tempering level's adapted factor)."""
    metric = adaptation.inv_metric if config.precondition else None
    step = (config.step_size if step is None else step) * factor * _widen(config, beta, ("both",))
    kernel = HMC(density, step, config.n_steps, inv_metric=metric, n_steps_jitter=config.n_steps_jitter)
    return _repeated(config, kernel)


def pcn_move(
    config: SamplerConfig, density, adaptation: Adaptation, beta: float = 1.0, step: float | None = None
):
    """pCN on ``density`` about :func:`gaussian_reference`, with ``step`` (default: ``pcn_step``)."""
    step = config.pcn_step if step is None else step
    return pcn_kernel(density, gaussian_reference(config, adaptation, density.dim), step)


def hessian_pcn_move(
    config: SamplerConfig, density, adaptation: Adaptation, beta: float = 1.0, step: float | None = None
):
    """h-pCN on ``density`` about :func:`laplace_reference`, with ``step`` (default: ``pcn_step``)."""
    step = config.pcn_step if step is None else step
    return HessianPCN(density, *laplace_reference(adaptation, config.method), step=step)


def _widen(config: SamplerConfig, beta: float, scalings: tuple[str, ...]) -> float:
    """beta^(-1/2) where ``temperature_scaling`` is one of ``scalings``, else 1.

    ``temperature_scaling`` says which moves widen at level m, by
    beta_m^(-1/2), as the tempered target's width grows.
    """
    widen = beta**-0.5 if beta > 0 else 1.0
    return widen if getattr(config, "temperature_scaling", "none") in scalings else 1.0


def _repeated(config: SamplerConfig, kernel):
    """The kernel ``inner_steps`` times over (once without that setting)."""
    steps = getattr(config, "inner_steps", 1)
    return kernel if steps == 1 else Cycle([kernel] * steps)


def gaussian_reference(
    config: SamplerConfig, adaptation: Adaptation, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """pCN's Gaussian reference: N(0, prior_sd^2 I) when ``prior_sd`` is set or tuned, else the warm-up's."""
    prior_sd = getattr(config, "prior_sd", None)
    if prior_sd is None and adaptation.whitened:
        prior_sd = 1.0
    if prior_sd is None:
        return adaptation.gaussian()
    return np.zeros(dim), np.full(dim, float(prior_sd) ** 2)


def laplace_reference(adaptation: Adaptation, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The warm-up's Laplace approximation (mean, eigenvalues, eigenvectors), or a clear error without one."""
    if adaptation.laplace is None:
        raise no_laplace(method)
    return adaptation.laplace


def no_laplace(method: str) -> ConfigError:
    """The error for h-pCN without a Laplace approximation (on a Stan program)."""
    return ConfigError(
        f"{method}: h-pCN needs a Laplace approximation (a MAP and a Gauss-Newton Hessian in whitened "
        "coordinates), which the PDE posterior provides and a Stan program does not; on a Stan program "
        "use pcn, whose reference is a Gaussian fitted to the warm-up"
    )


def pcn_kernel(density, reference: tuple[np.ndarray, np.ndarray], step: float):
    """pCN on ``density`` about the Gaussian ``reference``; O(dim) per step for N(0, I).

    Its state holds log ``density`` (:class:`~stanaccel.kernels.pcn.PosteriorPCN`), not the
    ratio to the reference, so that it can be the inner move of ``dc`` and ``tt-approx``, which
    read a move's state as its target's. About the standard normal (a whitened prior) it is
    :class:`HessianPCN` with no eigenpairs, the same proposals and decisions, without the
    O(dim^2) products of a general Gaussian reference.
    """
    mean, cov = reference
    root = gaussian_root(cov)
    if root.ndim == 1 and np.all(root == 1.0) and not np.any(mean):
        return HessianPCN(density, mean, np.zeros(0), np.zeros((len(mean), 0)), step=step)
    return PosteriorPCN(density, mean, cov, step=step)


class KernelFactory:
    """``factory(chain)`` builds chain ``chain``'s kernel for a resolved configuration.

    Parameters
    ----------
    config : SamplerConfig
        Resolved (:meth:`SamplerConfig.resolve`): no tuned setting left unset.
    model : StanModel
        The posterior (its program and data).
    data : dict
        The posterior's data (``beta`` set when the program declares it).
    adaptation : Adaptation
    seed : int
        Fixes random subsets (subsampled ladders, subset approximations).
    maps : LatentMaps, optional
        The trained autoencoder (``ae-hmc``, ``ae-pcn``).

    Attributes
    ----------
    densities : list of dict
        Per chain built: ``{"exact": density, "approx": [densities]}``.
    evaluate : callable (density, points) -> log densities, or None
        Where a kernel that evaluates batches of points evaluates them
        (:class:`~stanaccel.sampling.batches.ExecutorBatches`); None: on this process's cores.
    replicas : ndarray (chains, levels, dim), or None
        Where each chain's tempering levels start (``pt``, ``spt`` after the ladder's adaptation,
        :mod:`~stanaccel.sampling.schedule`); None: every level at the chain's start.
    """

    def __init__(
        self,
        config: SamplerConfig,
        model: StanModel,
        data: dict[str, Any],
        adaptation: Adaptation,
        *,
        seed: int = 0,
        maps=None,
    ):
        self.config, self.model, self.data, self.adaptation = config, model, data, adaptation
        self.seed, self.maps = seed, maps
        self.densities: list[dict[str, Any]] = []
        self.evaluate = None
        self.replicas: np.ndarray | None = None

    def posterior(self):
        """A chain's own Stan instance of the posterior."""
        return self.model.with_data(self.data)

    def timed_posterior(self) -> KeepConstants:
        """A chain's own posterior, constants kept: value-only evaluations skip autodiff; timed."""
        return KeepConstants(self.posterior())

    def __call__(self, chain: int):
        """Chain ``chain``'s kernel, as the method's record in the table of methods builds it."""
        build = method_record(self.config.method).build
        if build is None:
            raise ValueError(
                f"method {self.config.method!r} has no kernel (nuts and latent-nuts run Stan's NUTS)"
            )
        kernel = build(self)
        if self.replicas is not None and isinstance(kernel, ParallelTempering):
            kernel.replica_starts = self.replicas[chain]
        return kernel

    def on_posterior(self, move):
        """``move`` (such as :func:`mh_move`) on the chain's own posterior, recorded."""
        return move(self.config, self.record(self.timed_posterior()), self.adaptation)

    def reference(self) -> tuple[np.ndarray, np.ndarray]:
        """pCN's Gaussian reference (:func:`gaussian_reference`)."""
        return gaussian_reference(self.config, self.adaptation, self.model.dim)

    def record(self, exact, approx: list | None = None):
        self.densities.append({"exact": exact, "approx": approx or []})
        return exact

    def tempering(self, parallel: bool, move):
        """Parallel tempering (``parallel``) or tempered transitions cycled with a move at the target.

        The ladder is of powers of the likelihood when the method needs ``beta``,
        else of nested subsets of the observations; ``move`` (such as
        :func:`mh_move`) is the inner kernel at each level.
        """
        config = self.config
        powers = "beta" in config.needs
        betas = (
            geometric_betas(config.levels, config.beta_min)
            if config.betas is None
            else np.asarray(config.betas)
        )
        if powers:  # constants kept, so that the stepping-stone evidence is the program's
            posterior = self.timed_posterior()
            prior = KeepConstants(self.model.with_data({**self.data, "beta": 0.0}))
            ladder = power_ladder(posterior, prior, betas)
        else:
            observations = observations_for(config, self.model, self.data)
            n = observations.check(self.data)
            ladder = subsampled_ladder(
                lambda idx: self.model.with_data(observations.take(self.data, idx)), n, betas, seed=self.seed
            )
        self.record(posterior if powers else ladder.levels[0])

        hottest = float(np.min(betas[betas > 0]))  # the prior (beta = 0) widens as the next level up does
        factors = np.ones(len(betas)) if config.step_factors is None else np.asarray(config.step_factors)
        if len(factors) != len(betas):
            raise ValueError(
                f"step_factors has {len(factors)} values for a ladder of {len(betas)} levels: give one per "
                "level, the target's first (as the betas)"
            )

        def make(density, level):
            beta = float(betas[level]) or hottest
            return move(config, density, self.adaptation, beta, factor=float(factors[level]))

        if parallel:
            swap = getattr(config, "swap", "even_odd")  # a tempered-transition method's PT pilot: even/odd
            return ParallelTempering(ladder, make, swap=swap)
        base = move(config, ladder.levels[0], self.adaptation)
        return Cycle([base, TemperedTransitions(ladder, make)])

    def approximations(self) -> list:
        """This configuration's approximations (``approx``, or the ``ladder``), as specifications."""
        return approximation_specs(self.config)

    def with_approximations(self):
        """The chain's posterior and its approximations (recorded), for ``dc`` and ``tt-approx``."""
        exact = self.timed_posterior()
        approx = [
            approximation(spec, self.model, self.data, self.config, seed=self.seed)
            for spec in self.approximations()
        ]
        self.record(exact, approx)
        return exact, approx

    def discretizing_chain(self, move):
        """The discretizing chain: ``move`` on the approximation, marks accepted on pi."""
        config = self.config
        exact, approx = self.with_approximations()
        inner = move(config, approx[0], self.adaptation)
        return DiscretizingChain(exact, inner, moves=config.moves, jump=config.jump)

    def tempered_approximations(self, move):
        """Tempered transitions over the ladder of approximations, ``move`` at each level."""
        config = self.config
        exact, approx = self.with_approximations()
        ladder = approximation_ladder(exact, approx)
        return TemperedTransitions(ladder, lambda density, level: move(config, density, self.adaptation))

    def autoencoder_hmc(self):
        """AE-HMC on the chain's posterior (exact mode: with the full-space move)."""
        latent = self.latent_density()
        density = self.record(self.timed_posterior())
        return self.complemented(self.ae_hmc(density, self.config.latent_step_size, latent), density)

    def autoencoder_pcn(self):
        """AE-pCN on the chain's posterior (exact mode: with the full-space move)."""
        density = self.record(self.timed_posterior())
        return self.complemented(self.ae_pcn(density, self.config.pcn_step), density)

    def latent_density(self):
        """A Stan instance of the latent program (AE-HMC's approximate route), or None without one."""
        if getattr(self.config, "latent_program", None) is None:
            return None
        from stanaccel.latent import decoder_data

        program = compile_program(Path(self.config.latent_program))
        return StanModel(program, {**self.data, **decoder_data(self.maps)})

    def ae_hmc(self, density, step: float, latent=None):
        """AE-HMC on ``density`` with latent step ``step``, without the exact mode's full-space move.

        ``latent`` is the latent program's instance (:meth:`latent_density`) for AE-HMC's Stan route.
        """
        from stanaccel.latent import AutoencoderHMC

        config = self.config
        return AutoencoderHMC(
            density,
            self.maps,
            step,
            config.latent_n_steps,
            exact=config.exact,
            latent_density=latent,
            encoded_momentum=config.encoded_momentum,
        )

    def ae_pcn(self, density, step: float):
        """AE-pCN on ``density`` with latent step ``step``, without the exact mode's full-space move."""
        from stanaccel.latent import AutoencoderPCN

        config = self.config
        prior = self.reference() if (not config.exact or config.prior_sd is not None) else None
        return AutoencoderPCN(density, self.maps, exact=config.exact, step=step, prior=prior)

    def complemented(self, kernel, density):
        """A latent kernel, cycled in exact mode with a full-space HMC move (``complement_steps``)."""
        config = self.config
        if not config.exact:
            return kernel
        metric = self.adaptation.inv_metric if config.precondition else None
        return Cycle([kernel, HMC(density, config.step_size, config.complement_steps, inv_metric=metric)])
