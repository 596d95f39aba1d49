"""Kawasaki spin exchange: Metropolis swaps of unlike neighbouring spins, keeping the Hamming distance.

The baseline sampler of the constrained problem. Swapping two unlike spins
keeps the number of -1 spins. The attempts are a Numba-compiled loop
(``@numba.njit(cache=True)``) with the step's ``numpy.random.Generator``
passed in, so a seed reproduces a run.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from stanaccel.ising.intracluster import ising_energy, local_fields
from stanaccel.ising.models import IsingModel, as_spins
from stanaccel.kernels.state import Info, State


@numba.njit(cache=True)
def kawasaki_sweep(
    spins, indptr, indices, couplings, fields, beta, first, second, edge_couplings, attempts, rng
):
    """``attempts`` exchange attempts on ``spins`` in place.

    Returns (proposals, accepted, summed acceptance probability, new energy).

    Each attempt picks an edge uniformly; if its spins differ, swapping them
    (flipping both) changes the energy by 2 s_i f_i + 2 s_j f_j - 4 J_ij s_i s_j,
    f the local fields, and is accepted by Metropolis.
    """
    field = local_fields(spins, indptr, indices, couplings, fields)
    proposals = 0
    accepted = 0
    probability_sum = 0.0
    for _ in range(attempts):
        e = rng.integers(0, first.size)
        i = first[e]
        j = second[e]
        if spins[i] == spins[j]:
            continue
        proposals += 1
        si = spins[i]
        sj = spins[j]
        delta = 2.0 * si * field[i] + 2.0 * sj * field[j] - 4.0 * edge_couplings[e] * si * sj
        probability = math.exp(min(0.0, -beta * delta))
        probability_sum += probability
        if rng.random() < probability:
            accepted += 1
            for site in (i, j):
                change = -2 * spins[site]
                spins[site] = -spins[site]
                for k in range(indptr[site], indptr[site + 1]):
                    field[indices[k]] += couplings[k] * change
    return proposals, accepted, probability_sum, ising_energy(spins, indptr, indices, couplings, fields)


class KawasakiExchange:
    """Kawasaki spin-exchange Metropolis on an Ising model, keeping the number of -1 spins. Exact.

    A step is N attempts (N the number of spins). Each picks an edge
    uniformly and, if its two spins differ, proposes swapping them; the
    proposal is symmetric, so Metropolis on the energy change is exact for
    p(s) restricted to the start's Hamming distance. ``Info``'s acceptance
    probability is the mean over the attempts that proposed a swap (0 if none did).
    """

    exact = True

    def __init__(self, model: IsingModel):
        self.model = model
        self.first, self.second, self.edge_couplings = model.edges
        if self.first.size == 0:
            raise ValueError(f"{model.name} has no edges to exchange spins along")

    def init(self, position: np.ndarray) -> State:
        spins = as_spins(position, self.model)
        return State(spins, self.model.log_density(spins))

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        m = self.model
        spins = state.position.copy()
        proposals, accepted, probability_sum, energy = kawasaki_sweep(
            spins, m.indptr, m.indices, m.couplings, m.fields, m.beta,
            self.first, self.second, self.edge_couplings, m.n, rng,
        )  # fmt: skip
        info = Info(
            accepted > 0,
            probability_sum / proposals if proposals else 0.0,
            details={"attempts": m.n, "proposals": int(proposals), "accepted": int(accepted)},
        )
        return State(spins, -m.beta * energy), info
