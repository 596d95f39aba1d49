"""The benchmark posterior in one call: mesh, prior, simulated data, noise regime."""

from __future__ import annotations

import numpy as np

from stanaccel.pde.posterior import PDEPosterior
from stanaccel.pde.prior import BiLaplacianPrior, ExponentialPrior
from stanaccel.pde.problem import benchmark_solver, simulate_data

PRIORS = ("exponential", "bilaplacian")


def elliptic_posterior(
    n: int = 40, degree: int = 1, regime: str = "truth", seed: int = 0, prior: str = "exponential"
) -> PDEPosterior:
    """The elliptic inverse problem's posterior on an n x n mesh of P``degree`` elements.

    Parameters
    ----------
    n : int
        Cells per side of the inference mesh; data come from a 2n x 2n mesh.
    degree : int
        1 or 2.
    regime : str
        How the noise is set: ``"truth"``, ``"prior"`` or ``"observations"``
        (see :func:`stanaccel.pde.problem.noise_sd`).
    seed : int
        Seeds the noise (and the prior draws of the ``"prior"`` regime).
    prior : str
        ``"exponential"`` (the benchmark's, dense) or ``"bilaplacian"`` (sparse, for fine meshes).

    Notes
    -----
    ``posterior.observed`` holds the simulated data (:class:`~stanaccel.pde.problem.ObservedData`).
    """
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}, not {prior!r}")
    solver = benchmark_solver(n, degree)
    gaussian = ExponentialPrior(solver.nodes) if prior == "exponential" else BiLaplacianPrior(solver.basis)
    data = simulate_data(n, degree, regime, np.random.default_rng(seed), gaussian)
    posterior = PDEPosterior(solver, gaussian, data.values, data.noise_sd)
    posterior.observed = data
    return posterior
