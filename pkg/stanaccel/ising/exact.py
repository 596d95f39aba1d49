"""Exact enumeration of small Ising models: the references the samplers are tested against."""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy.special import logsumexp

from stanaccel.ising.models import IsingModel, check_distance

LARGEST_ENUMERATION = 22
"""The most spins :func:`all_states` lists (2^22 states, about 92 MB of int8)."""


def states_at_distance(n: int, distance: int) -> np.ndarray:
    """Every spin vector of length ``n`` with exactly ``distance`` spins -1, one a row (int8)."""
    distance = check_distance(distance, n)
    if math.comb(n, distance) > 2**LARGEST_ENUMERATION:
        raise ValueError(f"C({n}, {distance}) states are too many to list")
    flipped = np.array(list(itertools.combinations(range(n), distance)), dtype=np.int64)
    flipped = flipped.reshape(math.comb(n, distance), distance)
    states = np.ones((flipped.shape[0], n), dtype=np.int8)
    rows = np.repeat(np.arange(flipped.shape[0]), distance)
    states[rows, flipped.ravel()] = -1
    return states


def constrained_distribution(model: IsingModel, distance: int) -> tuple[np.ndarray, np.ndarray]:
    """The states at Hamming distance ``distance`` and their probabilities under the model."""
    states = states_at_distance(model.n, distance)
    log_density = model.log_density(states)
    return states, np.exp(log_density - logsumexp(log_density))


def all_states(n: int) -> np.ndarray:
    """All 2^n spin vectors, one a row (int8); ValueError beyond 22 spins."""
    if not 1 <= n <= LARGEST_ENUMERATION:
        raise ValueError(f"all_states lists 1 to {LARGEST_ENUMERATION} spins, not {n}")
    bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    return (1 - 2 * bits).astype(np.int8)


def exact_mean_energy(model: IsingModel) -> float:
    """E[E(s)] under the unconstrained model, by summing over all 2^n states (n ≤ 22)."""
    if model.n > LARGEST_ENUMERATION:
        raise ValueError(f"exact_mean_energy enumerates at most {LARGEST_ENUMERATION} spins, not {model.n}")
    energies = model.energy(all_states(model.n))
    log_weights = -model.beta * energies
    return float(np.sum(energies * np.exp(log_weights - logsumexp(log_weights))))
