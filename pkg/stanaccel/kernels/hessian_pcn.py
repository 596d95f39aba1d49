"""Hessian-informed pCN (h-pCN): the generalized pCN of a Laplace approximation in whitened coordinates.

With the prior N(0, I) (whitened coordinates) and the Gauss-Newton Hessian of
the negative log likelihood at the MAP m, H = V diag(lambda) V^T of low rank r,
the Laplace approximation is N(m, Gamma) with Gamma = (I + H)^-1. The proposal

    x' = m + rho (x - m) + sqrt(1 - rho^2) Gamma^(1/2) z,   z ~ N(0, I),

is reversible with respect to N(m, Gamma), so the Metropolis-Hastings ratio
is pi(x') N(x; m, Gamma) / (pi(x) N(x'; m, Gamma)) for the full posterior
pi (Rudolf and Sprungk 2018; Pinski et al. 2015's "gpCN", hIPPYlib's h-pCN).
Where the posterior is near Gaussian the ratio stays near one even at a
large step, and the proposal moves far along the directions the data
inform, which plain pCN (reversible for the prior only) cannot. A wrong m or
H leaves the kernel exact; it only mixes more slowly, and much more slowly
where the reference is narrower than the posterior (H overstated): the
weight pi / reference then grows into the tails, and a chain out there
rarely moves, as with an independence sampler whose proposal is too narrow.

Everything is O(dim r): Gamma^(1/2) = I - V diag(1 - 1/sqrt(1 + lambda)) V^T
and (x - m)^T (I + H) (x - m) = |x - m|^2 + sum lambda (V^T (x - m))^2.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import safe_log_density
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.pcn import pcn_rho
from stanaccel.kernels.state import Info, State, check_start

ORTHONORMAL_TOLERANCE = 1e-6
"""How far V^T V may be from the identity (largest entry) before the eigenvectors are refused."""


class HessianPCN:
    """Generalized pCN with the Laplace approximation N(mean, (I + H)^-1) as its reference; exact.

    Parameters
    ----------
    log_density : log density
        The full log posterior pi, in whitened coordinates (prior N(0, I)).
    mean : ndarray, (dim,)
        The reference's centre, normally the MAP.
    eigenvalues : ndarray, (r,)
        Non-negative eigenvalues lambda of the Gauss-Newton Hessian H of the
        negative log likelihood (r may be 0: then the reference is the prior
        shifted to ``mean``).
    eigenvectors : ndarray, (dim, r)
        Orthonormal columns V, H = V diag(lambda) V^T.
    rho : float in [0, 1)
        Autocorrelation of the proposal; give ``step`` (h) instead to use
        ``rho = (1 - h/4) / (1 + h/4)``, as :class:`~stanaccel.kernels.PCN` does.

    Notes
    -----
    With ``mean = 0`` and no eigenpairs (or zero eigenvalues) the reference is
    the prior and the kernel is plain pCN: the same proposals, and the same
    decisions from the same random numbers, as ``PCN(likelihood, 0, I, rho)``.
    ``State.log_density`` is the log posterior (plain pCN keeps the log
    likelihood there).
    """

    exact = True

    def __init__(
        self,
        log_density,
        mean,
        eigenvalues,
        eigenvectors,
        rho: float | None = None,
        step: float | None = None,
    ):
        self.rho = pcn_rho(rho, step)
        self.density = log_density
        self.mean, self.eigenvalues, self.eigenvectors = laplace_reference(
            mean, eigenvalues, eigenvectors, getattr(log_density, "dim", None)
        )
        # Gamma^(1/2) = I - V diag(shrink) V^T
        self.shrink = 1 - 1 / np.sqrt(1 + self.eigenvalues)

    @classmethod
    def at_map(cls, posterior, map_xi, hessian, rho: float | None = None, step: float | None = None):
        """h-pCN on a PDE posterior, centred at its MAP with its Gauss-Newton Hessian there.

        Parameters
        ----------
        posterior : PDEPosterior
            Or any log density in whitened coordinates.
        map_xi : ndarray or MAPEstimate
            The MAP in whitened coordinates (a :class:`~stanaccel.pde.MAPEstimate` gives its ``xi``).
        hessian : GaussNewtonHessian
            From :func:`~stanaccel.pde.gauss_newton_hessian` at the MAP: its
            ``eigenvalues`` and ``eigenvectors``.
        rho, step : float
            As for the constructor.
        """
        centre = getattr(map_xi, "xi", map_xi)
        return cls(posterior, centre, hessian.eigenvalues, hessian.eigenvectors, rho=rho, step=step)

    def proposal(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``m + rho (x - m) + sqrt(1 - rho^2) Gamma^(1/2) z``: keeps N(m, Gamma) invariant."""
        z = rng.standard_normal(self.mean.shape[0])
        correlated = z - self.eigenvectors @ (self.shrink * (self.eigenvectors.T @ z))
        return self.mean + self.rho * (x - self.mean) + np.sqrt(1 - self.rho**2) * correlated

    def log_reference(self, x: np.ndarray) -> float:
        """log N(x; m, Gamma) up to a constant: -0.5 (x - m)^T (I + H) (x - m)."""
        d = x - self.mean
        projected = self.eigenvectors.T @ d
        return -0.5 * float(d @ d + self.eigenvalues @ projected**2)

    def init(self, position: np.ndarray) -> State:
        position = np.array(position, dtype=float)
        if position.shape != self.mean.shape:
            raise ValueError(f"HessianPCN: the start point has shape {position.shape}, not {self.mean.shape}")
        return check_start(State(position, safe_log_density(self.density, position)), "HessianPCN")

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        proposal = self.proposal(state.position, rng)
        lp = safe_log_density(self.density, proposal)
        log_ratio = lp - state.log_density + self.log_reference(state.position) - self.log_reference(proposal)
        accepted, probability = accept(log_ratio, rng)
        info = Info(accepted, probability, failed=lp == -np.inf)
        return (State(proposal, lp), info) if accepted else (state, info)


def laplace_reference(mean, eigenvalues, eigenvectors, dim: int | None = None):
    """``(mean, eigenvalues, eigenvectors)`` as float arrays, checked, for :class:`HessianPCN`.

    Raises
    ------
    ValueError
        ``mean`` not a vector (of the density's ``dim``, where known), the
        eigenvectors not (dim, r) for r eigenvalues, an eigenvalue negative
        or not finite, or the eigenvectors not orthonormal.
    """
    mean = np.array(mean, dtype=float)
    eigenvalues = np.array(eigenvalues, dtype=float)
    eigenvectors = np.array(eigenvectors, dtype=float)
    if mean.ndim != 1:
        raise ValueError(f"the mean must be a vector, not shape {mean.shape}")
    if dim is not None and mean.shape != (dim,):
        raise ValueError(f"the mean has length {mean.shape[0]} but the density has dimension {dim}")
    if eigenvalues.ndim != 1:
        raise ValueError(f"the eigenvalues must be a vector, not shape {eigenvalues.shape}")
    expected = (mean.shape[0], eigenvalues.shape[0])
    if eigenvectors.shape != expected:
        raise ValueError(
            f"the eigenvectors must be (dim, r) = {expected}: one column of length {mean.shape[0]} "
            f"per eigenvalue, not shape {eigenvectors.shape}"
        )
    if not np.all(np.isfinite(eigenvalues)):
        raise ValueError(f"the eigenvalues must be finite: {eigenvalues}")
    if np.any(eigenvalues < 0):
        raise ValueError(
            f"the eigenvalues must be non-negative (a Gauss-Newton Hessian is positive semi-definite); "
            f"the smallest is {eigenvalues.min():.6g}"
        )
    gram = eigenvectors.T @ eigenvectors
    error = np.abs(gram - np.eye(len(gram))).max(initial=0.0)
    if not error <= ORTHONORMAL_TOLERANCE:
        raise ValueError(
            f"the eigenvectors must be orthonormal columns; V^T V is off the identity by {error:.3g}"
        )
    if not np.all(np.isfinite(mean)):
        raise ValueError("the mean must be finite")
    return mean, eigenvalues, eigenvectors
