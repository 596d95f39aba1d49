"""Build stanaccel's samplers for a Stan posterior from plain settings.

This is where Stan meets the kernel layer: a :class:`SamplerSpec` names a
method (``mh``, ``hmc``, ``pcn``-free here; ``pt``, ``tt``, ``spt``, ``stt``
with an ``mh`` or ``hmc`` inner kernel) and its settings, and
:func:`run_sampler` builds one kernel per chain (each with its own Stan
instances, so chains run in parallel threads and count their own cost) and
runs it.

Defaults follow the tempering-by-subsampling paper: M = 6 levels above the
target, beta_* = 1/8, geometric ladder; MH proposal scale 0.1 beta_m^(-1/2);
HMC with a fixed step size and number of steps (the paper used 0.01 and 5 for
GP regression, 10 for the multivariate normal). TT and STT proposals are
cycled with one inner step at the target, so the chain also moves within a
mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stanaccel.datasets import take_observations
from stanaccel.kernels import (
    HMC,
    Cycle,
    KernelRun,
    ParallelTempering,
    RandomWalkMetropolis,
    TemperedTransitions,
    geometric_betas,
    power_ladder,
    run_chains,
    subsampled_ladder,
)
from stanaccel.stan import StanModel

METHODS = ("mh", "hmc", "pt", "tt", "spt", "stt")


@dataclass
class SamplerSpec:
    """A sampler and its settings.

    Attributes
    ----------
    method : str
        One of ``mh``, ``hmc`` (no tempering), ``pt``, ``tt`` (power
        tempering), ``spt``, ``stt`` (tempering by subsampling).
    inner : str
        Inner kernel of the tempering methods: ``mh`` or ``hmc``.
    levels, beta_min : int, float
        Geometric ladder beta_m = beta_min^(m/levels), unless ``betas`` is given.
    mh_scale : float
        MH proposal scale at beta = 1; level m uses ``mh_scale * beta_m^(-1/2)``.
    step_size, n_steps : float, int
        HMC settings (the same at every level unless ``scale_step_size``).
    scale_step_size : bool
        Scale HMC's step size like MH's, by beta_m^(-1/2).
    inner_steps : int
        Inner transitions per level and direction (TT) or per iteration (PT).
    swap : str
        ``even_odd`` or ``random`` (PT).
    inv_metric : ndarray, optional
        Preconditioning from a warm-up (diagonal or dense), for MH and HMC.
    """

    method: str
    inner: str = "hmc"
    levels: int = 6
    beta_min: float = 1 / 8
    betas: list[float] | None = None
    mh_scale: float = 0.1
    step_size: float = 0.01
    n_steps: int = 5
    scale_step_size: bool = False
    inner_steps: int = 1
    swap: str = "even_odd"
    inv_metric: np.ndarray | None = field(default=None, repr=False)
    subset_seed: int = 0

    def check(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown sampler {self.method!r}; have {list(METHODS)}")
        if self.inner not in ("mh", "hmc"):
            raise ValueError(f"inner kernel must be 'mh' or 'hmc', not {self.inner!r}")

    @property
    def label(self) -> str:
        if self.method in ("mh", "hmc"):
            return self.method.upper()
        return f"{self.method.upper()} ({self.inner.upper()})"

    def ladder_betas(self) -> np.ndarray:
        return (
            np.asarray(self.betas) if self.betas is not None else geometric_betas(self.levels, self.beta_min)
        )


def inner_kernel(spec: SamplerSpec, density, beta: float, kind: str | None = None):
    """The inner kernel at inverse temperature ``beta``."""
    kind = kind or spec.inner
    widen = beta**-0.5 if beta > 0 else 10.0
    if kind == "mh":
        covariance = _covariance(spec.inv_metric)
        kernel = RandomWalkMetropolis(density, scale=spec.mh_scale * widen, covariance=covariance)
    else:
        step = spec.step_size * (widen if spec.scale_step_size else 1.0)
        kernel = HMC(density, step_size=step, n_steps=spec.n_steps, inv_metric=spec.inv_metric)
    return kernel if spec.inner_steps == 1 else Cycle([kernel] * spec.inner_steps)


def _covariance(inv_metric):
    if inv_metric is None:
        return None
    inv_metric = np.asarray(inv_metric)
    return np.diag(inv_metric) if inv_metric.ndim == 1 else inv_metric


def build_kernel(spec: SamplerSpec, model: StanModel, data: dict[str, Any], program: str):
    """One chain's kernel, with Stan instances of its own."""
    spec.check()
    posterior = model.with_data(data)
    if spec.method in ("mh", "hmc"):
        return inner_kernel(spec, posterior, 1.0, kind=spec.method)
    betas = spec.ladder_betas()
    if spec.method in ("pt", "tt"):
        ladder = power_ladder(posterior, model.with_data({**data, "beta": 0.0}), betas)
    else:
        n_obs = int(data["N"])
        ladder = subsampled_ladder(
            lambda idx: model.with_data(take_observations(data, idx, program)),
            n_obs,
            betas,
            seed=spec.subset_seed,
        )
    # On a subsampled ladder every level is a posterior (beta = 1 on its subset), but
    # its width grows as the subset shrinks, so proposals widen with the nominal beta_m.
    make = lambda density, m: inner_kernel(spec, density, float(betas[m]))  # noqa: E731
    if spec.method in ("pt", "spt"):
        return ParallelTempering(ladder, make, swap=spec.swap)
    base = inner_kernel(spec, ladder.levels[0], 1.0)
    return Cycle([base, TemperedTransitions(ladder, make)])


def run_sampler(
    spec: SamplerSpec,
    model: StanModel,
    data: dict[str, Any],
    program: str,
    initial_positions: np.ndarray,
    n_draws: int,
    *,
    seed: int = 0,
) -> KernelRun:
    """Run a sampler for several chains (one kernel and Stan instance set per chain)."""
    variables = model.variables()

    def constrain(positions: np.ndarray) -> dict[str, np.ndarray]:
        flat = np.apply_along_axis(model.param_constrain, -1, positions)
        return model.unflatten(flat) if len(variables) else {}

    return run_chains(
        lambda chain: build_kernel(spec, model, data, program),
        initial_positions,
        n_draws,
        seed=seed,
        constrain=constrain,
        name=spec.label,
    )
