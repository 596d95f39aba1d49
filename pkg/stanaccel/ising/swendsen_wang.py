"""Swendsen-Wang cluster updates of a ferromagnetic Ising model (NumPy and SciPy).

Unconstrained: a step flips whole clusters, so it does not keep the Hamming
distance; it is the reference sampler of the unconstrained model. Exact for
couplings J ≥ 0 (with any fields).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from stanaccel.ising.models import IsingModel, as_spins
from stanaccel.kernels.state import Info, State


class SwendsenWang:
    """Swendsen-Wang on an Ising model with couplings J ≥ 0. Exact; does not keep the Hamming distance.

    A step (one sweep): bond each satisfied edge (s_i = s_j) with
    probability 1 - exp(-2 beta J), find the clusters of the bonds, and draw
    each cluster's orientation from its conditional given the bonds: the
    cluster flips with probability 1 / (1 + exp(2 beta Σ_{i in C} h_i s_i)),
    1/2 with no field.
    """

    exact = True

    def __init__(self, model: IsingModel):
        self.model = model
        self.first, self.second, couplings = model.edges
        negative = np.flatnonzero(couplings < 0)
        if negative.size:
            e = negative[0]
            raise ValueError(
                f"SwendsenWang needs couplings J >= 0; the coupling of edge "
                f"({self.first[e]}, {self.second[e]}) is {couplings[e]}"
            )
        self.bond_probability = -np.expm1(-2 * model.beta * couplings)

    def init(self, position: np.ndarray) -> State:
        spins = as_spins(position, self.model)
        return State(spins, self.model.log_density(spins))

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        m = self.model
        spins = state.position
        satisfied = spins[self.first] == spins[self.second]
        bonded = satisfied & (rng.random(self.first.size) < self.bond_probability)
        graph = sparse.csr_array(
            (np.ones(np.count_nonzero(bonded), dtype=np.int8), (self.first[bonded], self.second[bonded])),
            shape=(m.n, m.n),
        )
        clusters, labels = connected_components(graph, directed=False)
        cluster_field = np.bincount(labels, weights=m.fields * spins, minlength=clusters)
        flip = rng.random(clusters) < 1.0 / (1.0 + np.exp(2 * m.beta * cluster_field))
        spins = np.where(flip[labels], -spins, spins).astype(np.int8)
        info = Info(
            True, 1.0, details={"clusters": int(clusters), "flipped": int(np.count_nonzero(flip[labels]))}
        )
        return State(spins, m.log_density(spins)), info
