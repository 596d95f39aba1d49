"""Constrained Ising models and Boltzmann machines, and their samplers.

The test problem of "Bayesian optimization for adaptive MCMC" (Mahendran,
Wang, Hamze & de Freitas 2012): Ising models restricted to the states at a
fixed Hamming distance n from the reference state (all spins +1; chains
start with half the spins flipped), sampled by the intracluster moves of
Hamze & de Freitas (2010). The models of the paper
(:mod:`~stanaccel.ising.models`):

- the 2-D ferromagnet, 60x60 periodic, J = 1, beta = 1/2.27 (:func:`ferromagnet_2d`);
- the 3-D ±J Edwards-Anderson spin glass, 9x9x9 periodic, beta = 1 (:func:`spin_glass_3d`);
- an RBM trained on the digits data, mapped exactly to an Ising model (:func:`digits_rbm`).

The samplers follow the kernel protocol of :mod:`stanaccel.kernels` (the
position is an int8 spin vector, the log density -beta E(s), one step one
sweep): :class:`IntraclusterMoves` and :class:`KawasakiExchange` keep the
Hamming distance, :class:`SwendsenWang` samples the unconstrained
ferromagnet. Their inner loops are Numba-compiled (``@numba.njit(cache=True)``),
except Swendsen-Wang's (NumPy and SciPy). :mod:`~stanaccel.ising.exact`
enumerates small models for the tests; :func:`run_chain` runs a chain
keeping the energy trace (an :class:`IsingRun`, the shared result type).
"""

from stanaccel.ising.exact import (
    all_states,
    constrained_distribution,
    exact_mean_energy,
    states_at_distance,
)
from stanaccel.ising.intracluster import IntraclusterMoves
from stanaccel.ising.kawasaki import KawasakiExchange
from stanaccel.ising.models import (
    IsingModel,
    boltzmann_to_ising,
    constrained_start,
    digits_rbm,
    ferromagnet_2d,
    hamming_distance,
    random_rbm,
    reference_state,
    spin_glass_3d,
)
from stanaccel.ising.run import IsingRun, run_chain
from stanaccel.ising.swendsen_wang import SwendsenWang

__all__ = [
    "IntraclusterMoves",
    "IsingModel",
    "IsingRun",
    "KawasakiExchange",
    "SwendsenWang",
    "all_states",
    "boltzmann_to_ising",
    "constrained_distribution",
    "constrained_start",
    "digits_rbm",
    "exact_mean_energy",
    "ferromagnet_2d",
    "hamming_distance",
    "random_rbm",
    "reference_state",
    "run_chain",
    "spin_glass_3d",
    "states_at_distance",
]
