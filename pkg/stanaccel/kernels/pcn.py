"""Preconditioned Crank-Nicolson (pCN) for targets with a Gaussian prior or reference.

The target is N(x | mean, covariance) * L(x). The proposal
x' = mean + rho (x - mean) + sqrt(1 - rho^2) C^(1/2) z keeps the prior
invariant, so the Metropolis-Hastings ratio is the likelihood ratio
L(x') / L(x) alone (Cotter et al. 2013). ``rho = (1 - h/4) / (1 + h/4)``
for a step h, as in the Deep MCMC paper.

Two kernels make the same proposals and the same decisions:

- :class:`PCN` takes the likelihood L and keeps log L in ``State.log_density``,
  as the papers write it;
- :class:`PosteriorPCN` takes the whole target pi and a Gaussian reference
  N(mean, C) (a prior, or a Gaussian fitted to pi) and keeps log pi there.

A kernel that reads its inner move's state as that move's target needs the
second: the discretizing chain weighs a mark by pi / pi* with pi* from the
inner state, and tempered transitions take each level's ratio from it. Given
:class:`PCN`, they would read log pi* - log N as log pi*, and sample pi x N
instead of pi (with N fitted to pi, half the posterior's variance).
"""

from __future__ import annotations

import copy

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.blas import dtrsv

from stanaccel.densities import safe_log_density
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.state import Info, State, check_start


def pcn_rho(rho: float | None, step: float | None) -> float:
    """The proposal's autocorrelation: ``rho`` itself, or ``(1 - h/4) / (1 + h/4)`` for a step h.

    Raises
    ------
    ValueError
        Neither or both given, or rho outside [0, 1).
    """
    if (rho is None) == (step is None):
        raise ValueError("give exactly one of rho and step")
    if rho is None:
        rho = (1 - step / 4) / (1 + step / 4)
    if not 0 <= rho < 1:
        raise ValueError(f"rho must be in [0, 1), not {rho}")
    return float(rho)


def gaussian_root(covariance: np.ndarray) -> np.ndarray:
    """A square root of a covariance: its Cholesky factor, or the vector of sds when it is diagonal.

    A diagonal covariance (the whitened prior N(0, I) of a PDE posterior) then
    costs O(dim) per draw and per density instead of O(dim^2).
    """
    covariance = np.asarray(covariance, dtype=float)
    if covariance.ndim == 1:
        return np.sqrt(covariance)
    diagonal = np.diag(covariance)
    if np.array_equal(covariance, np.diag(diagonal)):
        return np.sqrt(diagonal)
    return np.linalg.cholesky(covariance)


def colour(root: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``root @ z`` for a root from :func:`gaussian_root` (a vector of sds multiplies elementwise)."""
    return root * z if root.ndim == 1 else root @ z


def whiten(root: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``root^-1 d`` for a root from :func:`gaussian_root` (a triangular solve, or a division).

    One vector goes to BLAS's triangular solve (``dtrsv``) directly: a chain
    whitens a point on every step, and ``solve_triangular``'s checks and
    wrappers cost some 20 times the solve on a small dimension. A non-finite
    coordinate gives a non-finite result (a rejected proposal), not an error.
    """
    if root.ndim == 1:
        return d / root
    if d.ndim == 1:
        return dtrsv(root, d, lower=1)
    return solve_triangular(root, d, lower=True)


def with_step(kernel, step: float):
    """A copy of a pCN kernel (:class:`PosteriorPCN`, :class:`PCN`, ``HessianPCN``) with step ``step``.

    The copy shares the reference's square root: tuning the step (a kernel
    per iteration) then costs no Cholesky factorisation per iteration.
    """
    tuned = copy.copy(kernel)
    tuned.rho = pcn_rho(None, step)
    return tuned


def pcn_proposal(
    x: np.ndarray, mean: np.ndarray, cholesky: np.ndarray, rho: float, rng: np.random.Generator
) -> np.ndarray:
    """``mean + rho (x - mean) + sqrt(1 - rho^2) L xi``, xi ~ N(0, I): keeps N(mean, L L^T) invariant.

    ``cholesky`` is L, or the vector of sds of a diagonal covariance (:func:`gaussian_root`).
    """
    xi = colour(cholesky, rng.standard_normal(mean.shape[0]))
    return mean + rho * (x - mean) + np.sqrt(1 - rho**2) * xi


class PosteriorPCN:
    """pCN on a whole target pi about a Gaussian reference N(mean, C): exact for pi, its state log pi.

    The proposal keeps the reference invariant, so the Metropolis-Hastings
    ratio is pi(x') N(x) / (pi(x) N(x')), the likelihood ratio of
    :class:`PCN` with L = pi / N. ``State.log_density`` is log pi, as every
    other kernel's is, so it can move on an approximation pi* inside the
    discretizing chain or tempered transitions (see the module's notes).

    Parameters
    ----------
    log_density : log density
        The target pi.
    mean, covariance : ndarray
        The Gaussian reference (a covariance matrix, or a vector of variances).
    rho, step : float
        As for :class:`PCN`.
    """

    exact = True

    def __init__(self, log_density, mean, covariance, rho: float | None = None, step: float | None = None):
        self.rho = pcn_rho(rho, step)
        self.density = log_density
        self.mean = np.asarray(mean, dtype=float)
        self.cholesky = gaussian_root(covariance)

    def log_reference(self, x: np.ndarray) -> float:
        """log N(x | mean, C) up to a constant."""
        w = whiten(self.cholesky, x - self.mean)
        return -0.5 * float(w @ w)

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        return check_start(State(position, safe_log_density(self.density, position)), "PosteriorPCN")

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        proposal = pcn_proposal(state.position, self.mean, self.cholesky, self.rho, rng)
        lp = safe_log_density(self.density, proposal)
        log_ratio = lp - state.log_density + self.log_reference(state.position) - self.log_reference(proposal)
        accepted, probability = accept(log_ratio, rng)
        info = Info(accepted, probability, failed=lp == -np.inf)
        return (State(proposal, lp), info) if accepted else (state, info)


class PCN(PosteriorPCN):
    """pCN Metropolis-Hastings, exact for prior x likelihood; its state holds the log likelihood.

    Parameters
    ----------
    log_likelihood : log density
        The log likelihood L (the target divided by its Gaussian prior).
    mean, covariance : ndarray
        The Gaussian prior.
    rho : float in [0, 1)
        Autocorrelation of the proposal; give ``step`` (h) instead to use
        ``rho = (1 - h/4) / (1 + h/4)``.
    """

    def __init__(self, log_likelihood, mean, covariance, rho: float | None = None, step: float | None = None):
        super().__init__(log_likelihood, mean, covariance, rho=rho, step=step)
        self.log_likelihood = log_likelihood

    def log_reference(self, x: np.ndarray) -> float:
        """0: the prior N(mean, C) is the reference, and the density given is the likelihood alone."""
        return 0.0

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        state = State(position, safe_log_density(self.log_likelihood, position))
        return check_start(state, "PCN", density="log likelihood")
