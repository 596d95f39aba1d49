"""The elliptic PDE inverse problem: recover a log-transmissivity field from 25 pressure sensors.

-div(exp(u) grad p) = f on the unit square, no-flux boundaries, p with zero
boundary mean. Finite elements (scikit-fem, P1 or P2) assembled once
(:mod:`~stanaccel.pde.stiffness`), the forward and adjoint solves on one
factorisation (:mod:`~stanaccel.pde.solver`), the benchmark's forcing, truth,
sensors and data (:mod:`~stanaccel.pde.problem`), the Gaussian priors in
whitened form (:mod:`~stanaccel.pde.prior`), the posterior as a log density
(:mod:`~stanaccel.pde.posterior`), its MAP and Gauss-Newton Hessian
(:mod:`~stanaccel.pde.linearization`), all in one call
(:func:`elliptic_posterior`), and cheap surrogates of it for the Stan program
``pde_surrogate`` (:mod:`~stanaccel.pde.surrogates`).
"""

from stanaccel.pde.benchmark import elliptic_posterior
from stanaccel.pde.linearization import (
    GaussNewtonHessian,
    MAPEstimate,
    draw_laplace,
    find_map,
    gauss_newton_hessian,
)
from stanaccel.pde.posterior import PDELikelihood, PDEPosterior
from stanaccel.pde.prior import BiLaplacianPrior, ExponentialPrior
from stanaccel.pde.problem import (
    SENSORS,
    ObservedData,
    benchmark_solver,
    noise_sd,
    plume_source,
    simulate_data,
    true_log_transmissivity,
)
from stanaccel.pde.solver import EllipticSolver, ForwardSolution
from stanaccel.pde.stiffness import StiffnessMap
from stanaccel.pde.surrogates import (
    SURROGATE_PROGRAM,
    CoarseForwardMap,
    LinearForwardMap,
    coarse_surrogate_data,
    error_model,
    linear_surrogate_data,
    surrogate_data,
)

__all__ = [
    "SENSORS",
    "SURROGATE_PROGRAM",
    "BiLaplacianPrior",
    "CoarseForwardMap",
    "EllipticSolver",
    "ExponentialPrior",
    "ForwardSolution",
    "GaussNewtonHessian",
    "LinearForwardMap",
    "MAPEstimate",
    "ObservedData",
    "PDELikelihood",
    "PDEPosterior",
    "StiffnessMap",
    "benchmark_solver",
    "coarse_surrogate_data",
    "draw_laplace",
    "elliptic_posterior",
    "error_model",
    "find_map",
    "gauss_newton_hessian",
    "linear_surrogate_data",
    "noise_sd",
    "plume_source",
    "simulate_data",
    "surrogate_data",
    "true_log_transmissivity",
]
