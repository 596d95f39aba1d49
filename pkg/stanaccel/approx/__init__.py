"""Cheap approximations pi* of an expensive posterior pi, as log densities.

An approximation is a density, not a sampler: the exact samplers that use it
are :class:`stanaccel.kernels.DiscretizingChain` and tempered transitions
over :func:`stanaccel.kernels.approximation_ladder`.

- :func:`subset_of_data`: the same Stan program on a random subset of m
  observations (optionally scaled up to the full data's weight);
- :func:`low_rank`: ``stan/gp_ard_lowrank.stan``, FITC or subset of
  regressors with m inducing inputs, O(N m^2) per evaluation;
- :func:`laplace` and :func:`control_variates` (:mod:`stanaccel.approx.taylor`):
  built from the posterior alone about its mode (Stan's L-BFGS,
  :func:`stanaccel.stan.optimize.optimize`): the
  Gaussian there, and a scaled subset corrected by second-order Taylor
  control variates;
- :class:`ApproximationPair`: any expensive and cheap density on one
  unconstrained space, checked to match, with their measured cost ratio.
"""

from stanaccel.approx.gp import inducing_inputs, low_rank, subset_of_data
from stanaccel.approx.pair import ApproximationPair, KeepConstants
from stanaccel.approx.taylor import (
    ControlVariateDensity,
    LaplaceDensity,
    Quadratic,
    ScaledSubset,
    central_hessian,
    check_laplace,
    control_variate_quadratic,
    control_variates,
    laplace,
)

__all__ = [
    "ApproximationPair",
    "ControlVariateDensity",
    "KeepConstants",
    "LaplaceDensity",
    "Quadratic",
    "ScaledSubset",
    "central_hessian",
    "check_laplace",
    "control_variate_quadratic",
    "control_variates",
    "inducing_inputs",
    "laplace",
    "low_rank",
    "subset_of_data",
]
