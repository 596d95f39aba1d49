"""Cheap surrogates pi* of the PDE posterior, as data for the Stan program ``pde_surrogate``.

A surrogate keeps the posterior's whitened coordinates xi and its prior
N(0, I) and replaces the forward map xi -> p at the sensors by a cheap one:

:class:`CoarseForwardMap`
    The same PDE on a coarse n x n mesh of P1 elements, with u at the coarse
    nodes taken from the fine field there. In Stan it is solved densely; the
    Python twin (an :class:`~stanaccel.pde.EllipticSolver` on the coarse mesh)
    gives the same observations, for the error model and for tests.
:class:`LinearForwardMap`
    The forward map linearised at the MAP, obs = at_map + J (xi - xi_map),
    J the Jacobian of :func:`~stanaccel.pde.gauss_newton_hessian`.

A surrogate's error is systematic, so the plain likelihood N(y; obs*, sd^2 I)
can be far too confident. The approximation error model (Kaipio and
Somersalo, "Statistical inverse problems: discretization, model reduction
and inverse crimes", 2007) treats d = obs - obs* at points where the
posterior lives as Gaussian noise of its own: y ~ N(obs* + mean(d), sd^2 I +
cov(d)). :func:`error_model` estimates it from points the caller draws
(from the Laplace approximation, :func:`~stanaccel.pde.draw_laplace`, or the
prior).

The data builders return the dict for ``StanModel(compile_program(
program_path("pde_surrogate")), data)``; the branch not used is given with
size 0.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from stanaccel.pde.linearization import gauss_newton_hessian
from stanaccel.pde.mesh import check_mesh_size
from stanaccel.pde.solver import EllipticSolver

SURROGATE_PROGRAM = "pde_surrogate"
"""The bundled Stan program of both surrogates (``stanaccel.programs.program_path(SURROGATE_PROGRAM)``)."""


class CoarseForwardMap:
    """The posterior's PDE on a coarse n x n P1 mesh: u at its nodes is the fine field's value there.

    The coarse nodal field is ``offset + field_map @ xi``, with ``field_map``
    the fine finite-element field evaluated at the coarse nodes times the
    prior's map L (through the fine basis, so a P2 fine mesh works as well).

    Parameters
    ----------
    posterior : PDEPosterior
    n_coarse : int
        Cells per side of the coarse mesh: at least 2 and no finer than the
        fine mesh's node spacing (``n * degree`` cells of the fine mesh).

    Attributes
    ----------
    solver : EllipticSolver
        The coarse P1 solver, with the fine solver's forcing and sensors.
    offset : ndarray, (n_nodes,)
    field_map : ndarray, (n_nodes, dim)
    """

    def __init__(self, posterior, n_coarse: int = 10):
        fine = posterior.solver
        n_coarse = check_mesh_size(n_coarse)
        if n_coarse > fine.n * fine.degree:
            raise ValueError(
                f"the coarse mesh ({n_coarse} cells per side) must not be finer than the posterior's "
                f"({fine.n}x{fine.n} P{fine.degree}, node spacing 1/{fine.n * fine.degree})"
            )
        self.posterior = posterior
        self.dim = posterior.dim
        self.solver = EllipticSolver(n_coarse, 1, fine.source, fine.sensors)
        at_nodes = sp.csr_matrix(fine.basis.probes(self.solver.nodes))  # (coarse nodes, fine dofs)
        self.offset = at_nodes @ posterior.prior.field(np.zeros(self.dim))
        self.field_map = np.ascontiguousarray(posterior.prior.pullback(at_nodes.T.toarray()).T)

    def field(self, xi: np.ndarray) -> np.ndarray:
        """u at the coarse nodes."""
        return self.offset + self.field_map @ self.posterior.check_point(xi)

    def observe(self, xi: np.ndarray) -> np.ndarray:
        """p at the sensors, solved on the coarse mesh."""
        return self.solver.observe(self.field(xi))

    def stan_data(self) -> dict:
        """The program's ``linear = 0`` data: the coarse mesh's arrays, sparse ones as 1-based CSR.

        The pinned matrix keeps the nodes in their natural order (the Python
        solver reorders them to reduce fill; a dense solve does not care).
        """
        s = self.solver
        stiffness = s.stiffness
        free = np.setdiff1d(np.arange(s.dim), [s.pinned])
        number = np.full(s.dim, -1)
        number[free] = np.arange(len(free))
        rows, cols = number[stiffness.rows], number[stiffness.cols]
        kept = np.flatnonzero((rows >= 0) & (cols >= 0))  # still sorted by row, then column
        return {
            "n_nodes": s.dim,
            "n_free": len(free),
            "n_points": stiffness.interpolation.shape[0],
            "field_offset": self.offset,
            "field_map": self.field_map,
            **csr_data("interp", stiffness.interpolation),
            "n_entries": len(kept),
            **csr_data("values", stiffness.values[kept]),
            "pattern_v": cols[kept] + 1,
            "pattern_u": np.searchsorted(rows[kept], np.arange(len(free) + 1)) + 1,
            "free": free + 1,
            "load": (s.load - s.load.sum() * s.boundary)[free],
            "boundary": s.boundary,
            "observe": s.observation.toarray(),
        }


class LinearForwardMap:
    """The forward map linearised at the MAP: obs = at_map + J (xi - xi_map).

    Parameters
    ----------
    posterior : PDEPosterior
    map_xi : ndarray or MAPEstimate
        Where to linearise (a :class:`~stanaccel.pde.MAPEstimate` gives its ``xi``).
    jacobian : ndarray, (n_obs, dim), optional
        d obs / d xi at ``map_xi``; computed by :func:`~stanaccel.pde.gauss_newton_hessian` when None.
    """

    def __init__(self, posterior, map_xi, jacobian: np.ndarray | None = None):
        self.posterior = posterior
        self.dim = posterior.dim
        self.xi_map = posterior.check_point(getattr(map_xi, "xi", map_xi)).copy()
        if jacobian is None:
            jacobian = gauss_newton_hessian(posterior, self.xi_map).jacobian
        jacobian = np.asarray(jacobian, dtype=float)
        expected = (len(posterior.data), posterior.dim)
        if jacobian.shape != expected:
            raise ValueError(f"the Jacobian must be (n_obs, dim) = {expected}, not shape {jacobian.shape}")
        self.jacobian = jacobian
        self.at_map = posterior.solver.observe(posterior.field(self.xi_map))

    def observe(self, xi: np.ndarray) -> np.ndarray:
        """The linearised observations."""
        return self.at_map + self.jacobian @ (self.posterior.check_point(xi) - self.xi_map)

    def stan_data(self) -> dict:
        """The program's ``linear = 1`` data."""
        return {"xi_map": self.xi_map, "at_map": self.at_map, "map_jacobian": self.jacobian}


def csr_data(name: str, matrix) -> dict:
    """A sparse matrix as Stan's 1-based CSR arrays ``{name}_nnz``, ``_w``, ``_v``, ``_u``."""
    matrix = sp.csr_matrix(matrix).sorted_indices()
    return {
        f"{name}_nnz": matrix.nnz,
        f"{name}_w": matrix.data,
        f"{name}_v": matrix.indices + 1,
        f"{name}_u": matrix.indptr + 1,
    }


def empty_coarse_data(n_obs: int, dim: int) -> dict:
    """The ``linear = 0`` data with size 0, for the linear surrogate."""
    return {
        "n_nodes": 0,
        "n_free": 0,
        "n_points": 0,
        "field_offset": np.zeros(0),
        "field_map": np.zeros((0, dim)),
        **csr_data("interp", sp.csr_matrix((0, 0))),
        "n_entries": 0,
        **csr_data("values", sp.csr_matrix((0, 0))),
        "pattern_v": np.zeros(0, dtype=int),
        "pattern_u": np.ones(1, dtype=int),
        "free": np.zeros(0, dtype=int),
        "load": np.zeros(0),
        "boundary": np.zeros(0),
        "observe": np.zeros((n_obs, 0)),
    }


def empty_linear_data(n_obs: int, dim: int) -> dict:
    """The ``linear = 1`` data with size 0, for the coarse surrogate."""
    return {"xi_map": np.zeros(0), "at_map": np.zeros(0), "map_jacobian": np.zeros((0, dim))}


def error_model(posterior, forward_map, error_points: np.ndarray | None = None):
    """The observation error of a surrogate: its mean and covariance, noise included.

    Parameters
    ----------
    posterior : PDEPosterior
    forward_map : CoarseForwardMap or LinearForwardMap
        Anything with ``observe(xi)``.
    error_points : ndarray, (m, dim), optional
        Whitened points (m >= 2) where the posterior lives, e.g. Laplace
        draws. None gives the plain surrogate's noise.

    Returns
    -------
    mean : ndarray, (n_obs,)
        mean(d), d = exact - surrogate observations at the points (0 without points).
    covariance : ndarray, (n_obs, n_obs)
        noise_sd^2 I + cov(d) (noise_sd^2 I without points).
    """
    n_obs = len(posterior.data)
    noise = posterior.noise_sd**2 * np.eye(n_obs)
    if error_points is None:
        return np.zeros(n_obs), noise
    points = np.asarray(error_points, dtype=float)
    if points.ndim != 2 or points.shape[1] != posterior.dim or len(points) < 2:
        raise ValueError(
            f"error_points must be (m, {posterior.dim}) whitened points with m >= 2, not shape {points.shape}"
        )
    if not np.all(np.isfinite(points)):
        raise ValueError("error_points must be finite")
    solver = posterior.solver
    d = np.array([solver.observe(posterior.field(x)) - forward_map.observe(x) for x in points])
    return d.mean(axis=0), noise + np.cov(d, rowvar=False)


def surrogate_data(posterior, forward_map, error_points: np.ndarray | None = None) -> dict:
    """The ``pde_surrogate`` data of a forward map, with the error model of ``error_points``.

    ``forward_map`` is a :class:`CoarseForwardMap` or a :class:`LinearForwardMap`.
    """
    if isinstance(forward_map, CoarseForwardMap):
        linear = 0
    elif isinstance(forward_map, LinearForwardMap):
        linear = 1
    else:
        raise ValueError(f"forward_map must be a CoarseForwardMap or a LinearForwardMap, not {forward_map!r}")
    n_obs, dim = len(posterior.data), posterior.dim
    mean, covariance = error_model(posterior, forward_map, error_points)
    empty = empty_linear_data if linear == 0 else empty_coarse_data
    return {
        "D": dim,
        "n_obs": n_obs,
        "y": posterior.data,
        "error_mean": mean,
        "error_chol": np.linalg.cholesky(covariance),
        "linear": linear,
        **empty(n_obs, dim),
        **forward_map.stan_data(),
    }


def coarse_surrogate_data(posterior, n_coarse: int = 10, error_points: np.ndarray | None = None) -> dict:
    """``pde_surrogate`` data for the PDE on a coarse n_coarse x n_coarse P1 mesh.

    A :class:`CoarseForwardMap`, with the error model of ``error_points`` (see :func:`error_model`).
    """
    return surrogate_data(posterior, CoarseForwardMap(posterior, n_coarse), error_points)


def linear_surrogate_data(
    posterior, map_xi, jacobian: np.ndarray | None = None, error_points: np.ndarray | None = None
) -> dict:
    """``pde_surrogate`` data for the forward map linearised at the MAP.

    A :class:`LinearForwardMap` (its Jacobian by :func:`~stanaccel.pde.gauss_newton_hessian` when
    None), with the error model of ``error_points`` (see :func:`error_model`).
    """
    return surrogate_data(posterior, LinearForwardMap(posterior, map_xi, jacobian), error_points)
