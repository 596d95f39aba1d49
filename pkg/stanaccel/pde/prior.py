"""Gaussian priors on u's nodal values, in whitened form u = mean + L xi with xi ~ N(0, I).

Every sampler and approximation works in xi: the prior there is N(0, I),
which pCN keeps invariant, and the posterior is better conditioned than in u.
A prior only has to map xi to u (:meth:`field`) and pull a gradient in u back
to xi (:meth:`pullback`, L^T g). The benchmark's exponential-kernel prior is
dense; the bi-Laplacian one is sparse, for fine meshes.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import splu
from scipy.spatial.distance import cdist
from skfem import FacetBasis, asm
from skfem.models.poisson import laplace
from skfem.models.poisson import mass as mass_form

SIGMA_U = 1.25
CORRELATION_LENGTH = 0.0625


class ExponentialPrior:
    """The benchmark's prior: covariance sigma^2 exp(-|s - s'| / (2 s0)) between nodes, dense Cholesky.

    Parameters
    ----------
    nodes : ndarray, (2, dim)
        Where u's nodal values sit.
    sigma : float
        Prior standard deviation (1.25 in the benchmark).
    length : float
        s0 (0.0625 in the benchmark).
    mean : float or ndarray
        Prior mean of u (0 in the benchmark).

    Notes
    -----
    The factor is dense, dim^2 numbers: fine to a few thousand nodes (6561 at
    80x80 P1 or 40x40 P2 is 344 MB and a few seconds to factor).
    """

    def __init__(
        self, nodes: np.ndarray, sigma: float = SIGMA_U, length: float = CORRELATION_LENGTH, mean=0.0
    ):
        nodes = np.asarray(nodes, dtype=float)
        if nodes.ndim != 2 or nodes.shape[0] != 2:
            raise ValueError(f"nodes must be an array of shape (2, dim), not {nodes.shape}")
        if sigma <= 0 or length <= 0:
            raise ValueError(f"sigma and length must be positive, not {sigma} and {length}")
        self.dim = nodes.shape[1]
        self.sigma, self.length = float(sigma), float(length)
        self.mean = np.broadcast_to(np.asarray(mean, dtype=float), (self.dim,)).copy()
        covariance = sigma**2 * np.exp(-cdist(nodes.T, nodes.T) / (2 * length))
        self.cholesky = np.linalg.cholesky(covariance)

    def field(self, xi: np.ndarray) -> np.ndarray:
        """u = mean + L xi (xi may be draws in rows)."""
        return self.mean + xi @ self.cholesky.T

    def pullback(self, gradient_u: np.ndarray) -> np.ndarray:
        """L^T g: a gradient in u as a gradient in xi (g may be columns)."""
        return self.cholesky.T @ gradient_u

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Prior draws of u (rows when ``size`` is given)."""
        shape = (self.dim,) if size is None else (size, self.dim)
        return self.field(rng.standard_normal(shape))


class BiLaplacianPrior:
    """A sparse Matern-like prior for fine meshes: covariance A^-1 M A^-1, A = gamma (-Laplace) + delta M.

    The operator (delta - gamma Laplace)^2 with no-flux boundaries has a Matern
    covariance of smoothness 1 in 2D (Lindgren, Rue and Lindstroem 2011).
    Whitened: u = mean + A^-1 D^(1/2) xi with D the mass matrix's diagonal
    scaled to the square's area (a positive lumping that works for P1 and P2),
    so a draw or a gradient costs two triangular solves with one factorisation
    of A made here, never a dense matrix. ``gamma`` and ``delta`` follow from
    the marginal standard deviation and the correlation length as in
    hIPPYlib's BiLaplacianPrior.

    Parameters
    ----------
    basis : skfem Basis
        The solver's finite-element space (``solver.basis``).
    sigma : float
        Marginal standard deviation away from the boundary (1.25, as the benchmark's).
    length : float
        Correlation length rho (distance where the correlation is about 0.13);
        0.125 = 2 s0 by default, the exponential kernel's length scale.
    mean : float or ndarray

    robin : bool
        Add the Robin boundary term of Roininen, Huttunen and Lasanen (2014),
        gamma sqrt(delta / gamma) / 1.42 times the boundary mass matrix, as
        hIPPYlib does: without it the no-flux boundary inflates the variance
        near the boundary (about twice ``sigma^2`` at the edges, four times at
        the corners); with it the marginal sd stays near ``sigma`` up to the edges.
    """

    def __init__(
        self,
        basis,
        sigma: float = SIGMA_U,
        length: float = 2 * CORRELATION_LENGTH,
        mean=0.0,
        robin: bool = True,
    ):
        if sigma <= 0 or length <= 0:
            raise ValueError(f"sigma and length must be positive, not {sigma} and {length}")
        self.dim = int(basis.N)
        self.sigma, self.length = float(sigma), float(length)
        self.mean = np.broadcast_to(np.asarray(mean, dtype=float), (self.dim,)).copy()
        kappa = np.sqrt(8.0) / length  # smoothness 1 in 2D
        gamma = 1.0 / (np.sqrt(4 * np.pi) * kappa * sigma)
        delta = kappa**2 * gamma
        stiffness, mass = asm(laplace, basis), asm(mass_form, basis)
        diagonal = mass.diagonal() * (1.0 / mass.diagonal().sum())  # the unit square's area is 1
        self.root_mass = np.sqrt(diagonal)
        operator = gamma * stiffness + delta * mass
        if robin:
            boundary = FacetBasis(basis.mesh, basis.elem, facets=basis.mesh.boundary_facets())
            operator = operator + gamma * np.sqrt(delta / gamma) / 1.42 * asm(mass_form, boundary)
        self._operator = splu(operator.tocsc())

    def field(self, xi: np.ndarray) -> np.ndarray:
        """u = mean + A^-1 D^(1/2) xi (xi may be draws in rows)."""
        xi = np.asarray(xi, dtype=float)
        return self.mean + self._operator.solve(np.ascontiguousarray((self.root_mass * xi).T)).T

    def pullback(self, gradient_u: np.ndarray) -> np.ndarray:
        """D^(1/2) A^-1 g: a gradient in u as a gradient in xi (g may be columns)."""
        solved = self._operator.solve(np.ascontiguousarray(gradient_u, dtype=float))
        return solved * (self.root_mass if solved.ndim == 1 else self.root_mass[:, None])

    def sample(self, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
        """Prior draws of u (rows when ``size`` is given)."""
        shape = (self.dim,) if size is None else (size, self.dim)
        return self.field(rng.standard_normal(shape))
