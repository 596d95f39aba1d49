"""The forward solver: -div(exp(u) grad p) = f, no-flux boundaries, zero boundary mean of p.

With no-flux boundaries p is defined up to a constant; the constant is fixed
by asking the mean of p over the boundary to be zero. Two formulations:

``"pinned"`` (the fast one, the default)
    Fix p = 0 at one boundary node (the corner (0, 0)) and drop its row and
    column: the rest of K is symmetric positive definite and keeps the fixed
    CSR pattern, numbered once in a fill-reducing (minimum degree) order, so
    an evaluation is one product (the new values of K), one ``splu``
    factorisation without ordering or pivoting, and triangular solves with
    it (forward and adjoint).
    The solution is then shifted by its boundary mean. The load is first made
    compatible (``ones @ b = 0``) by removing its total along the boundary
    weights, which is exactly what the Lagrange multiplier does in the
    bordered system, so the two formulations give the same p.
``"bordered"``
    The zero boundary mean as a constraint with a Lagrange multiplier:
    [[K, w], [w^T, 0]] [p, mu] = [b, 0]. Slower (the matrix is rebuilt each
    call); kept as the reference the pinned formulation is tested against.

Observations are p at the sensors, through the basis functions of the
element holding each sensor (a sparse matrix, made once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from stanaccel.pde.mesh import boundary_weights, check_degree, check_mesh_size, load_vector, unit_square_basis
from stanaccel.pde.stiffness import StiffnessMap

FORMULATIONS = ("pinned", "bordered")


@dataclass
class ForwardSolution:
    """One forward solve: the pressure, the coefficient it used and the factorisation to reuse.

    Attributes
    ----------
    pressure : ndarray
        p at the degrees of freedom, zero boundary mean.
    observations : ndarray
        p at the sensors.
    kappa : ndarray
        exp(u_h) at the quadrature points.
    solve_adjoint : callable
        g -> lam with ``lam = K^-1 g`` under the solve's constraint (``g`` one vector or columns),
        the factorisation of the forward solve reused.
    """

    pressure: np.ndarray
    observations: np.ndarray
    kappa: np.ndarray
    solve_adjoint: Callable[[np.ndarray], np.ndarray]


class EllipticSolver:
    """Finite elements for -div(exp(u) grad p) = f on the unit square, assembled once.

    Parameters
    ----------
    n : int
        Cells per side (n x n squares, two triangles each), 2 to 400.
    degree : int
        1 (P1) or 2 (P2) Lagrange elements, for both u and p.
    source : callable (x, y) -> f
        The forcing term, vectorised over NumPy arrays.
    sensors : ndarray, (k, 2)
        Where p is observed.
    formulation : str
        ``"pinned"`` (fast) or ``"bordered"`` (Lagrange multiplier); see the module notes.

    Attributes
    ----------
    dim : int
        Degrees of freedom of u (and p).
    nodes : ndarray, (2, dim)
        Coordinates of the degrees of freedom (u's nodal values sit there).
    source : callable
        The forcing, kept so that the same problem can be posed on another mesh.
    pinned : int
        The node where the pinned formulation fixes p = 0 before shifting it (the corner (0, 0)).
    """

    def __init__(self, n: int, degree: int, source, sensors: np.ndarray, formulation: str = "pinned"):
        if formulation not in FORMULATIONS:
            raise ValueError(f"formulation must be one of {FORMULATIONS}, not {formulation!r}")
        self.n, self.degree, self.formulation = check_mesh_size(n), check_degree(degree), formulation
        self.basis = unit_square_basis(self.n, self.degree)
        self.dim = int(self.basis.N)
        self.nodes = self.basis.doflocs
        self.stiffness = StiffnessMap(self.basis)
        self.boundary = boundary_weights(self.basis)
        self.source = source
        self.load = load_vector(self.basis, source)
        sensors = np.atleast_2d(np.asarray(sensors, dtype=float))
        if sensors.shape[1] != 2 or np.any((sensors < 0) | (sensors > 1)):
            raise ValueError(f"sensors must be (k, 2) points in the unit square, not shape {sensors.shape}")
        self.sensors = sensors
        self.observation = sp.csr_matrix(self.basis.probes(sensors.T))
        self.pinned = int(np.argmin(np.sum(self.nodes**2, axis=0)))  # the corner (0, 0), a boundary node
        free = np.setdiff1d(np.arange(self.dim), [self.pinned])
        self._pattern = self._pinned_pattern(free)
        reference = self._pinned_matrix(self.stiffness.matrix_values(np.ones(self.stiffness.values.shape[1])))
        ordering = splu(reference, permc_spec="MMD_AT_PLUS_A", options={"SymmetricMode": True}).perm_c
        self._free = free[np.argsort(ordering)]  # the fill-reducing order, found once
        self._pattern = self._pinned_pattern(self._free)
        self._compatible_load = (self.load - self.load.sum() * self.boundary)[self._free]

    def _pinned_pattern(self, free: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of K's values make the pinned matrix, and its CSR pattern, unknowns numbered as ``free``."""
        number = np.full(self.dim, -1)
        number[free] = np.arange(len(free))
        rows, cols = number[self.stiffness.rows], number[self.stiffness.cols]
        kept = np.flatnonzero((rows >= 0) & (cols >= 0))
        kept = kept[np.lexsort((cols[kept], rows[kept]))]
        indptr = np.searchsorted(rows[kept], np.arange(len(free) + 1)).astype(np.int32)
        return kept, cols[kept].astype(np.int32), indptr

    def _pinned_matrix(self, values: np.ndarray) -> sp.csc_matrix:
        """K less the pinned row and column, in the solver's order (symmetric: CSR arrays = CSC arrays)."""
        kept, indices, indptr = self._pattern
        size = self.dim - 1
        return sp.csc_matrix((values[kept], indices, indptr), shape=(size, size))

    def check_field(self, u: np.ndarray) -> np.ndarray:
        """u as a float vector of length ``dim``, or a ValueError naming the lengths."""
        u = np.asarray(u, dtype=float)
        if u.shape != (self.dim,):
            raise ValueError(
                f"the field must be a vector of {self.dim} nodal values "
                f"({self.n}x{self.n} mesh, P{self.degree}), not shape {u.shape}"
            )
        return u

    def solve(self, u: np.ndarray) -> ForwardSolution:
        """Solve for p given u's nodal values; the factorisation is kept for adjoint solves.

        Raises
        ------
        FloatingPointError
            exp(u) overflows or vanishes somewhere, or the stiffness matrix
            cannot be factorised: an ``ArithmeticError``, so a sampler's
            proposal there is rejected (:mod:`stanaccel.densities`), never a crash.
        """
        u = self.check_field(u)
        with np.errstate(over="ignore", under="ignore"):
            kappa = self.stiffness.coefficient(u)
        if not (np.all(np.isfinite(kappa)) and kappa.min() > 0):
            raise FloatingPointError(
                f"exp(u) is not a positive finite coefficient (u from {u.min():.3g} to {u.max():.3g})"
            )
        values = self.stiffness.matrix_values(kappa)
        try:
            if self.formulation == "pinned":
                pressure, solve_adjoint = self._solve_pinned(values)
            else:
                pressure, solve_adjoint = self._solve_bordered(values)
        except RuntimeError as error:  # SuperLU: "Factor is exactly singular"
            raise FloatingPointError(f"the stiffness matrix could not be factorised: {error}") from error
        if not np.all(np.isfinite(pressure)):
            raise FloatingPointError("the forward solve gave a non-finite pressure")
        return ForwardSolution(pressure, self.observation @ pressure, kappa, solve_adjoint)

    def observe(self, u: np.ndarray) -> np.ndarray:
        """p at the sensors for the field u."""
        return self.solve(u).observations

    def _solve_pinned(self, values: np.ndarray):
        # SPD: the ordering found at set-up, no pivoting
        lu = splu(
            self._pinned_matrix(values),
            permc_spec="NATURAL",
            diag_pivot_thresh=0.0,
            options={"SymmetricMode": True},
        )
        pressure = np.zeros(self.dim)
        pressure[self._free] = lu.solve(self._compatible_load)
        pressure -= self.boundary @ pressure

        def solve_adjoint(g: np.ndarray) -> np.ndarray:
            # p = S q with q the pinned solution and S = I - ones w^T, so the adjoint load is S^T g
            shifted = g - np.multiply.outer(self.boundary, g.sum(axis=0))
            lam = np.zeros_like(shifted)
            lam[self._free] = lu.solve(np.ascontiguousarray(shifted[self._free]))
            return lam

        return pressure, solve_adjoint

    def _solve_bordered(self, values: np.ndarray):
        stiffness = sp.csr_matrix((values, self.stiffness.indices, self.stiffness.indptr))
        column = sp.csr_matrix(self.boundary[:, None])
        lu = splu(sp.bmat([[stiffness, column], [column.T, None]], format="csc"))
        pressure = lu.solve(np.append(self.load, 0.0))[: self.dim]

        def solve_adjoint(g: np.ndarray) -> np.ndarray:
            padded = np.concatenate([g, np.zeros((1,) + g.shape[1:])])
            return lu.solve(padded)[: self.dim]

        return pressure, solve_adjoint

    def misfit(self, u: np.ndarray, data: np.ndarray, noise_sd: float) -> float:
        """0.5 |observations(u) - data|^2 / noise_sd^2, the negative log likelihood up to a constant."""
        residual = self.observe(u) - data
        return 0.5 * float(residual @ residual) / noise_sd**2

    def misfit_gradient(self, u: np.ndarray, data: np.ndarray, noise_sd: float) -> tuple[float, np.ndarray]:
        """The misfit and its gradient in u, by one forward and one adjoint solve on one factorisation.

        With K p = b and lam = K^-1 O^T r / sd^2 (r the residual at the sensors),
        d misfit / du = -d(lam^T K(exp(u)) p)/du with lam and p held fixed.
        """
        solution = self.solve(u)
        residual = solution.observations - data
        lam = solution.solve_adjoint(self.observation.T @ (residual / noise_sd**2))
        gradient = -self.stiffness.form_gradient(solution.kappa, lam, solution.pressure)
        return 0.5 * float(residual @ residual) / noise_sd**2, gradient

    def observation_jacobian(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The observations at u and their Jacobian d obs / du, (k, dim), by k adjoint solves."""
        solution = self.solve(u)
        lam = solution.solve_adjoint(self.observation.T.toarray())
        jacobian = -self.stiffness.form_gradient(solution.kappa, lam, solution.pressure)
        return solution.observations, np.ascontiguousarray(jacobian.T)
