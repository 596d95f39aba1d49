"""The stiffness matrix of a variable coefficient, assembled once and updated by a sparse product.

K(kappa)_rc = sum over quadrature points q of kappa_q * G_q,rc, where G_q,rc is
the weighted product of basis gradients (phi_r, phi_c) at q. G does not depend
on the coefficient, so it is computed once and stored as a sparse matrix from
the coefficient at the quadrature points to the values of K in a fixed CSR
pattern: a new coefficient costs one sparse matrix-vector product, and the
same pattern serves every evaluation (no re-assembly by scikit-fem). The
coefficient is exp(u_h) at the quadrature points, u_h the finite-element
interpolant of u's nodal values.

The transpose of the same map gives derivatives: d(lam^T K p)/du is
``interpolation^T (kappa * values^T (lam[rows] * p[cols])))``, which is all an
adjoint gradient or a Jacobian needs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from skfem import Basis


class StiffnessMap:
    """The linear map from exp(u) at the quadrature points to the stiffness matrix's CSR values.

    Parameters
    ----------
    basis : skfem Basis
        The finite-element space, with the quadrature to integrate by.

    Attributes
    ----------
    rows, cols : ndarray
        Row and column of each stored value, in CSR order (sorted by row, then column).
    indptr, indices : ndarray
        The CSR pattern of K (symmetric, so also its CSC pattern).
    values : sparse matrix, (n_values, n_quadrature_points)
        K's values are ``values @ kappa``.
    interpolation : sparse matrix, (n_quadrature_points, n_dofs)
        u at the quadrature points is ``interpolation @ u``.
    """

    def __init__(self, basis: Basis):
        n_dofs = basis.N
        n_elements, n_points = basis.dx.shape
        points = np.arange(n_elements * n_points).reshape(n_elements, n_points)
        grads = np.stack([phi.grad for (phi,) in basis.basis])  # (local, 2, element, point)
        local = np.einsum("idep,jdep,ep->ijep", grads, grads, basis.dx)  # (local, local, element, point)
        dofs = basis.element_dofs  # (local, element)
        rows = np.broadcast_to(dofs[:, None, :, None], local.shape).ravel()
        cols = np.broadcast_to(dofs[None, :, :, None], local.shape).ravel()
        keys, position = np.unique(rows.astype(np.int64) * n_dofs + cols, return_inverse=True)
        self.n_dofs = n_dofs
        self.rows, self.cols = keys // n_dofs, keys % n_dofs
        self.indices = self.cols.astype(np.int32)
        self.indptr = np.searchsorted(self.rows, np.arange(n_dofs + 1)).astype(np.int32)
        point_of = np.broadcast_to(points[None, None], local.shape).ravel()
        self.values = sp.csr_matrix((local.ravel(), (position, point_of)), shape=(len(keys), points.size))
        values = np.stack([np.asarray(phi) for (phi,) in basis.basis])  # (local, element, point)
        point_rows = np.broadcast_to(points[None], values.shape).ravel()
        dof_cols = np.broadcast_to(dofs[:, :, None], values.shape).ravel()
        self.interpolation = sp.csr_matrix(
            (values.ravel(), (point_rows, dof_cols)), shape=(points.size, n_dofs)
        )

    def coefficient(self, u: np.ndarray) -> np.ndarray:
        """kappa = exp(u_h) at the quadrature points."""
        return np.exp(self.interpolation @ u)

    def matrix_values(self, kappa: np.ndarray) -> np.ndarray:
        """K(kappa)'s values in the fixed CSR pattern (``rows``, ``cols``)."""
        return self.values @ kappa

    def matrix(self, kappa: np.ndarray) -> sp.csr_matrix:
        """K(kappa) as a CSR matrix (a convenience; solvers use ``matrix_values``)."""
        shape = (self.n_dofs, self.n_dofs)
        return sp.csr_matrix((self.matrix_values(kappa), self.indices, self.indptr), shape=shape)

    def form_gradient(self, kappa: np.ndarray, lam: np.ndarray, p: np.ndarray) -> np.ndarray:
        """d(lam^T K(exp(u)) p)/du; ``lam`` may have columns (one derivative per column).

        Parameters
        ----------
        kappa : ndarray
            exp(u_h) at the quadrature points, from :meth:`coefficient`.
        lam : ndarray, (n_dofs,) or (n_dofs, k)
        p : ndarray, (n_dofs,)
        """
        outer = lam[self.rows] * (p[self.cols] if lam.ndim == 1 else p[self.cols, None])
        at_points = self.values.T @ outer
        at_points *= kappa if lam.ndim == 1 else kappa[:, None]
        return self.interpolation.T @ at_points
