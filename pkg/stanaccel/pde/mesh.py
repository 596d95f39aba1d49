"""The finite-element space: P1 or P2 Lagrange elements on an n x n triangulated unit square.

One scikit-fem basis carries the mesh, the degrees of freedom and the
quadrature that every other part of the solver reads. The unknown field u and
the pressure p live in the same space, so u's nodal values are the degrees of
freedom (dimension (n+1)^2 for P1, (2n+1)^2 for P2).
"""

from __future__ import annotations

import numbers

import numpy as np
from skfem import Basis, ElementTriP1, ElementTriP2, FacetBasis, MeshTri

ELEMENTS = {1: ElementTriP1, 2: ElementTriP2}
MIN_CELLS, MAX_CELLS = 2, 400


def check_mesh_size(n) -> int:
    """``n`` as an int, or a ValueError naming the bad mesh size."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not MIN_CELLS <= n <= MAX_CELLS:
        raise ValueError(
            f"mesh size must be an integer number of cells per side in [{MIN_CELLS}, {MAX_CELLS}], not {n!r}"
        )
    return int(n)


def check_degree(degree) -> int:
    """``degree`` as an int, or a ValueError: only P1 and P2 elements are supported."""
    if degree not in ELEMENTS:
        raise ValueError(f"element degree must be 1 (P1) or 2 (P2), not {degree!r}")
    return int(degree)


def unit_square_basis(n: int, degree: int = 1, intorder: int | None = None) -> Basis:
    """A Lagrange basis of ``degree`` on the unit square cut into n x n squares, two triangles each.

    ``intorder`` is the quadrature's exactness; by default ``2 * degree``,
    exact for the stiffness of a coefficient that is linear on each triangle.
    """
    n, degree = check_mesh_size(n), check_degree(degree)
    grid = np.linspace(0.0, 1.0, n + 1)
    mesh = MeshTri.init_tensor(grid, grid)
    return Basis(mesh, ELEMENTS[degree](), intorder=2 * degree if intorder is None else intorder)


def boundary_weights(basis: Basis) -> np.ndarray:
    """w with ``w @ p`` the mean of p over the boundary: the boundary integrals of the basis functions.

    Normalised to sum to one, so ``w @ ones = 1``.
    """
    facets = FacetBasis(basis.mesh, basis.elem, facets=basis.mesh.boundary_facets())
    integrals = np.zeros(basis.N)
    values = facets.basis  # per local function: (DiscreteField, ) with value (n_facets, n_points)
    dofs = facets.element_dofs
    for i, (phi,) in enumerate(values):
        np.add.at(integrals, dofs[i], np.sum(np.asarray(phi) * facets.dx, axis=1))
    return integrals / integrals.sum()


def load_vector(basis: Basis, source, intorder: int = 8) -> np.ndarray:
    """b_i = integral of source(x, y) phi_i over the square, with a quadrature fine enough for plumes."""
    fine = Basis(basis.mesh, basis.elem, intorder=intorder)
    x, y = np.asarray(fine.global_coordinates())
    weighted = np.asarray(source(x, y), dtype=float) * fine.dx
    load = np.zeros(basis.N)
    for i, (phi,) in enumerate(fine.basis):
        np.add.at(load, fine.element_dofs[i], np.sum(np.asarray(phi) * weighted, axis=1))
    return load
