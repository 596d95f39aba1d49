"""The posterior's mode and its Gauss-Newton Hessian: what a Hessian-informed proposal needs.

The MAP maximises the log posterior by L-BFGS with adjoint gradients. At a
point xi the Gauss-Newton Hessian of the negative log likelihood in whitened
coordinates is H = J^T J / sd^2 with J = d obs / d xi, a (k, dim) matrix for k
sensors, made by k adjoint solves on one factorisation. So H has rank at most
k, and its eigenpairs come from the SVD of J / sd: eigenvalues s^2, eigenvectors
the right singular vectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize


@dataclass
class MAPEstimate:
    """The maximum a posteriori point in whitened coordinates.

    Attributes
    ----------
    xi : ndarray
    field : ndarray
        u at the nodes.
    log_density : float
    gradient : ndarray
        The log posterior's gradient at ``xi`` (near zero at convergence).
    iterations : int
    converged : bool
    message : str
    """

    xi: np.ndarray
    field: np.ndarray
    log_density: float
    gradient: np.ndarray
    iterations: int
    converged: bool
    message: str


def find_map(posterior, start: np.ndarray | None = None, gtol: float = 1e-6, max_iterations: int = 500):
    """Maximise the log posterior with scipy's L-BFGS-B and adjoint gradients.

    Parameters
    ----------
    posterior : PDEPosterior
    start : ndarray, optional
        Whitened start point; the prior mean (xi = 0) by default.
    gtol : float
        Stop when every gradient component is below this.
    max_iterations : int
    """
    start = np.zeros(posterior.dim) if start is None else posterior.check_point(start)

    def negative(xi):
        value, gradient = posterior.log_density_gradient(xi)
        return -value, -gradient

    result = minimize(
        negative, start, jac=True, method="L-BFGS-B", options={"gtol": gtol, "maxiter": max_iterations}
    )
    value, gradient = posterior.log_density_gradient(result.x)
    return MAPEstimate(
        result.x,
        posterior.field(result.x),
        value,
        gradient,
        int(result.nit),
        bool(result.success),
        str(result.message),
    )


@dataclass
class GaussNewtonHessian:
    """The Gauss-Newton Hessian J^T J / sd^2 of the negative log likelihood in xi, by its eigenpairs.

    Attributes
    ----------
    eigenvalues : ndarray, (k,)
        Non-negative, descending; k = number of sensors (at most k are non-zero).
    eigenvectors : ndarray, (dim, k)
        Orthonormal columns.
    jacobian : ndarray, (k, dim)
        d obs / d xi.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    jacobian: np.ndarray

    def matrix(self) -> np.ndarray:
        """The dense (dim, dim) Hessian V diag(lambda) V^T."""
        return (self.eigenvectors * self.eigenvalues) @ self.eigenvectors.T

    def posterior_precision(self) -> np.ndarray:
        """I + H: the precision of the Laplace approximation in whitened coordinates."""
        return np.eye(len(self.eigenvectors)) + self.matrix()


def gauss_newton_hessian(posterior, xi: np.ndarray) -> GaussNewtonHessian:
    """The Gauss-Newton Hessian of the negative log likelihood at xi (k adjoint solves, one SVD)."""
    _, jacobian_u = posterior.solver.observation_jacobian(posterior.field(xi))
    jacobian = posterior.prior.pullback(jacobian_u.T).T  # J_xi = J_u L
    _, singular, right = np.linalg.svd(jacobian / posterior.noise_sd, full_matrices=False)
    return GaussNewtonHessian(singular**2, right.T, jacobian)


def draw_laplace(
    map_xi, hessian: GaussNewtonHessian, rng: np.random.Generator, size: int | None = None
) -> np.ndarray:
    """Draws of the Laplace approximation N(map, (I + H)^-1) in whitened coordinates, O(dim r) each.

    With H = V diag(lambda) V^T of low rank r, (I + H)^(-1/2) = I - V diag(1 - 1/sqrt(1 + lambda)) V^T
    (the square root :class:`~stanaccel.kernels.HessianPCN` proposes with), so
    x = map + z - V diag(1 - 1/sqrt(1 + lambda)) V^T z for z ~ N(0, I).

    Parameters
    ----------
    map_xi : ndarray or MAPEstimate
        The centre (a :class:`MAPEstimate` gives its ``xi``).
    hessian : GaussNewtonHessian
        Its ``eigenvalues`` and ``eigenvectors``.
    rng : numpy Generator
    size : int, optional
        Number of draws (rows); one vector when None.
    """
    centre = np.asarray(getattr(map_xi, "xi", map_xi), dtype=float)
    vectors = hessian.eigenvectors
    if centre.ndim != 1 or vectors.shape[0] != centre.shape[0]:
        raise ValueError(
            f"the MAP (shape {centre.shape}) and the Hessian's eigenvectors (shape {vectors.shape}) "
            "must have the same dimension"
        )
    shrink = 1 - 1 / np.sqrt(1 + hessian.eigenvalues)
    z = rng.standard_normal(centre.shape if size is None else (size, centre.shape[0]))
    return centre + z - ((z @ vectors) * shrink) @ vectors.T
