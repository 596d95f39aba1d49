"""Ising models and Boltzmann machines as one record, and the models of the paper.

An :class:`IsingModel` is the distribution p(s) ∝ exp(-beta E(s)) over spins
s ∈ {-1, +1}^N with E(s) = -Σ_{edges i<j} J_ij s_i s_j - Σ_i h_i s_i. The
couplings are kept as symmetric CSR neighbour lists (every edge stored in
both directions), the arrays the Numba-compiled samplers walk.

The constrained problem of the paper fixes the Hamming distance to a
reference state c, the all-ones binary state (all spins +1): the samplers
that keep it (:class:`~stanaccel.ising.IntraclusterMoves`,
:class:`~stanaccel.ising.KawasakiExchange`) preserve the number of -1 spins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from scipy import sparse


@dataclass(frozen=True, eq=False)
class IsingModel:
    """p(s) ∝ exp(-beta E(s)), E(s) = -Σ_{i<j} J_ij s_i s_j - Σ_i h_i s_i, over s ∈ {-1, +1}^N.

    Build one with :meth:`from_edges`, which validates the input.

    Attributes
    ----------
    indptr, indices, couplings : ndarray
        Symmetric CSR neighbour lists: the neighbours of site i are
        ``indices[indptr[i]:indptr[i + 1]]``, with couplings
        ``couplings[indptr[i]:indptr[i + 1]]``; each edge appears in both rows.
    fields : ndarray (N,)
        The external fields h.
    beta : float
        The inverse temperature.
    name : str
        What the model is, for tables and messages.
    """

    indptr: np.ndarray
    indices: np.ndarray
    couplings: np.ndarray
    fields: np.ndarray
    beta: float = 1.0
    name: str = "ising"

    @classmethod
    def from_edges(
        cls, n, i, j, couplings, fields=None, beta: float = 1.0, name: str = "ising"
    ) -> IsingModel:
        """The model on ``n`` sites with edges (i[e], j[e]) of coupling ``couplings[e]``.

        Raises ValueError for a self-loop, an edge given twice (in either
        order), a site index out of range, non-finite couplings or fields,
        or a non-positive beta.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, not {n!r}")
        n = int(n)
        i, j = np.asarray(i), np.asarray(j)
        couplings = np.asarray(couplings, dtype=float)
        if not (i.ndim == j.ndim == couplings.ndim == 1 and i.size == j.size == couplings.size):
            raise ValueError(
                f"i, j and couplings must be 1-D of one length, not shapes {i.shape}, {j.shape}, "
                f"{couplings.shape}"
            )
        if i.size and not (np.issubdtype(i.dtype, np.integer) and np.issubdtype(j.dtype, np.integer)):
            raise ValueError(f"edge indices must be integers, not {i.dtype} and {j.dtype}")
        i, j = i.astype(np.int64), j.astype(np.int64)
        outside = (i < 0) | (i >= n) | (j < 0) | (j >= n)
        if outside.any():
            e = int(np.flatnonzero(outside)[0])
            raise ValueError(f"edge {e} ({i[e]}, {j[e]}) has a site outside 0..{n - 1}")
        loops = i == j
        if loops.any():
            e = int(np.flatnonzero(loops)[0])
            raise ValueError(f"edge {e} is a self-loop at site {i[e]}")
        low, high = np.minimum(i, j), np.maximum(i, j)
        keys = low * n + high
        unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
        if (counts > 1).any():
            key = unique[counts > 1][0]
            raise ValueError(f"edge ({key // n}, {key % n}) is given more than once")
        if not np.all(np.isfinite(couplings)):
            e = int(np.flatnonzero(~np.isfinite(couplings))[0])
            raise ValueError(f"coupling {e} is {couplings[e]}, not finite")
        fields = np.zeros(n) if fields is None else np.array(fields, dtype=float)
        if fields.shape != (n,):
            raise ValueError(f"fields must have shape ({n},), not {fields.shape}")
        if not np.all(np.isfinite(fields)):
            raise ValueError(f"field {int(np.flatnonzero(~np.isfinite(fields))[0])} is not finite")
        check_beta(beta)
        matrix = sparse.csr_array(
            (
                np.concatenate([couplings, couplings]),
                (np.concatenate([low, high]), np.concatenate([high, low])),
            ),
            shape=(n, n),
        )
        matrix.sort_indices()
        return cls(
            indptr=matrix.indptr.astype(np.int64),
            indices=matrix.indices.astype(np.int64),
            couplings=matrix.data.astype(float),
            fields=fields,
            beta=float(beta),
            name=name,
        )

    @property
    def n(self) -> int:
        """The number of spins."""
        return len(self.fields)

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each edge once: (i, j, J) with i < j."""
        rows = np.repeat(np.arange(self.n), np.diff(self.indptr))
        upper = rows < self.indices
        return rows[upper], self.indices[upper], self.couplings[upper]

    @property
    def max_degree(self) -> int:
        """The largest number of neighbours of a site."""
        return int(np.diff(self.indptr).max(initial=0))

    @cached_property
    def coupling_matrix(self) -> sparse.csr_array:
        """J as a symmetric sparse matrix."""
        return sparse.csr_array((self.couplings, self.indices, self.indptr), shape=(self.n, self.n))

    def local_fields(self, spins: np.ndarray) -> np.ndarray:
        """Σ_j J_ij s_j + h_i for each site (the last axis of ``spins``)."""
        spins = np.asarray(spins, dtype=float)
        return (self.coupling_matrix @ spins.T).T + self.fields

    def local_energy(self, spins: np.ndarray) -> np.ndarray:
        """e_i = -s_i (Σ_j J_ij s_j + h_i): large where site i disagrees with its neighbours and field."""
        return -np.asarray(spins, dtype=float) * self.local_fields(spins)

    def energy(self, spins: np.ndarray) -> float | np.ndarray:
        """E(s) of one spin vector, or an array of energies of a batch (one state a row)."""
        s = np.asarray(spins, dtype=float)
        first, second, couplings = self.edges
        energy = -(s[..., first] * s[..., second]) @ couplings - s @ self.fields
        return float(energy) if s.ndim == 1 else energy

    def log_density(self, spins: np.ndarray) -> float | np.ndarray:
        """-beta E(s): the unnormalised log probability."""
        return -self.beta * self.energy(spins)

    def with_beta(self, beta: float) -> IsingModel:
        """The same model at inverse temperature ``beta``."""
        check_beta(beta)
        return replace(self, beta=float(beta))


def check_beta(beta) -> None:
    """Raise ValueError unless ``beta`` is a finite positive number."""
    if not (isinstance(beta, int | float | np.number) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite positive number, not {beta!r}")


def as_spins(position, model: IsingModel) -> np.ndarray:
    """A copy of ``position`` as an int8 spin vector of the model, or ValueError."""
    spins = np.asarray(position)
    if spins.shape != (model.n,):
        raise ValueError(f"spins must have shape ({model.n},), not {spins.shape}")
    if np.count_nonzero(np.abs(spins) == 1) != model.n:
        raise ValueError("spins must be +1 or -1")
    return spins.astype(np.int8)


def lattice_edges(shape: tuple[int, ...], periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    """Nearest-neighbour edges of a hypercubic lattice, sites numbered in C order."""
    if periodic and min(shape) < 3:
        raise ValueError(f"a periodic lattice needs sides of at least 3 (else edges repeat), not {shape}")
    sites = np.arange(math.prod(shape)).reshape(shape)
    i, j = [], []
    for axis in range(len(shape)):
        neighbour = np.roll(sites, -1, axis=axis)
        if periodic:
            i.append(sites.ravel())
            j.append(neighbour.ravel())
        else:
            inside = [slice(None)] * len(shape)
            inside[axis] = slice(0, shape[axis] - 1)
            i.append(sites[tuple(inside)].ravel())
            j.append(neighbour[tuple(inside)].ravel())
    return np.concatenate(i), np.concatenate(j)


def ferromagnet_2d(side: int = 60, coupling: float = 1.0, beta: float = 1 / 2.27, periodic: bool = True):
    """The 2-D ferromagnet of the paper: a side x side lattice, J = 1, no field, beta = 1/2.27.

    beta = 1/2.27 is just below the critical inverse temperature 0.4407, where
    single-site samplers mix slowly.
    """
    i, j = lattice_edges((side, side), periodic)
    return IsingModel.from_edges(
        side * side, i, j, np.full(i.size, float(coupling)), beta=beta, name=f"ferromagnet {side}x{side}"
    )


def spin_glass_3d(side: int = 9, beta: float = 1.0, seed: int = 0, periodic: bool = True) -> IsingModel:
    """The 3-D Edwards-Anderson ±J spin glass of the paper: side^3 sites, no field.

    Each coupling is +1 or -1 with equal probability. The authors' coupling
    file is not available, so the couplings are drawn from
    ``np.random.default_rng(seed)``: one fixed instance per seed.
    """
    i, j = lattice_edges((side, side, side), periodic)
    couplings = np.where(np.random.default_rng(seed).random(i.size) < 0.5, 1.0, -1.0)
    return IsingModel.from_edges(side**3, i, j, couplings, beta=beta, name=f"spin glass {side}^3 seed {seed}")


def boltzmann_to_ising(
    weights, visible_bias, hidden_bias, beta: float = 1.0, name: str = "rbm"
) -> IsingModel:
    """The Ising model of a restricted Boltzmann machine over binary units.

    The RBM has energy E(v, h) = -v'Wh - b'v - c'h over v ∈ {0,1}^V,
    h ∈ {0,1}^H. Substituting x = (1 + s)/2 gives, up to an additive constant,
    an Ising model on V + H spins (visible first) with J = W/4 on each
    visible-hidden pair, fields b/2 + W 1/4 on the visible spins and
    c/2 + W'1/4 on the hidden ones. The constant does not change the
    distribution, so the two are the same model; binary all-ones is spin +1.
    """
    weights = np.asarray(weights, dtype=float)
    visible_bias = np.asarray(visible_bias, dtype=float)
    hidden_bias = np.asarray(hidden_bias, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must be a (visible, hidden) matrix, not shape {weights.shape}")
    n_visible, n_hidden = weights.shape
    if visible_bias.shape != (n_visible,) or hidden_bias.shape != (n_hidden,):
        raise ValueError(
            f"biases must have shapes ({n_visible},) and ({n_hidden},), "
            f"not {visible_bias.shape} and {hidden_bias.shape}"
        )
    if not np.all(np.isfinite(weights)):
        raise ValueError("weights must be finite")
    visible, hidden = np.meshgrid(np.arange(n_visible), n_visible + np.arange(n_hidden), indexing="ij")
    fields = np.concatenate(
        [visible_bias / 2 + weights.sum(axis=1) / 4, hidden_bias / 2 + weights.sum(axis=0) / 4]
    )
    return IsingModel.from_edges(
        n_visible + n_hidden,
        visible.ravel(),
        hidden.ravel(),
        weights.ravel() / 4,
        fields,
        beta=beta,
        name=name,
    )


def random_rbm(
    n_visible: int, n_hidden: int, scale: float = 0.5, seed: int = 0, beta: float = 1.0
) -> IsingModel:
    """An RBM with Gaussian weights and biases of standard deviation ``scale``, as an Ising model.

    For tests: small random Boltzmann machines whose constrained states can be listed.
    """
    rng = np.random.default_rng(seed)
    weights = scale * rng.standard_normal((n_visible, n_hidden))
    visible_bias = scale * rng.standard_normal(n_visible)
    hidden_bias = scale * rng.standard_normal(n_hidden)
    return boltzmann_to_ising(
        weights, visible_bias, hidden_bias, beta=beta, name=f"random rbm {n_visible}x{n_hidden} seed {seed}"
    )


def digits_rbm(n_hidden: int = 50, seed: int = 0, beta: float = 1.0, n_iter: int = 20) -> IsingModel:
    """An RBM trained on the 8x8 digits of scikit-learn (64 visible units), as an Ising model.

    scikit-learn's ``BernoulliRBM`` is trained by persistent contrastive
    divergence on the 1797 images with pixels scaled to [0, 1]; it takes
    about a second, so nothing is cached.
    """
    from sklearn.datasets import load_digits
    from sklearn.neural_network import BernoulliRBM

    pixels = load_digits().data / 16.0
    rbm = BernoulliRBM(
        n_components=n_hidden, learning_rate=0.05, batch_size=20, n_iter=n_iter, random_state=seed
    )
    rbm.fit(pixels)
    return boltzmann_to_ising(
        rbm.components_.T,
        rbm.intercept_visible_,
        rbm.intercept_hidden_,
        beta=beta,
        name=f"digits rbm 64x{n_hidden} seed {seed}",
    )


def reference_state(model: IsingModel) -> np.ndarray:
    """The reference state c of the constrained problem: all spins +1 (binary all ones)."""
    return np.ones(model.n, dtype=np.int8)


def hamming_distance(spins: np.ndarray) -> int | np.ndarray:
    """The Hamming distance to the reference state: the number of -1 spins (per row of a batch)."""
    distance = np.sum(np.asarray(spins) == -1, axis=-1)
    return int(distance) if np.ndim(distance) == 0 else distance


def check_distance(distance, n: int) -> int:
    """``distance`` as an int, or ValueError unless it is an integer in 0..n."""
    if isinstance(distance, bool) or not isinstance(distance, int | np.integer) or not 0 <= distance <= n:
        raise ValueError(f"distance must be an integer in 0..{n}, not {distance!r}")
    return int(distance)


def constrained_start(model: IsingModel, distance: int, rng: np.random.Generator) -> np.ndarray:
    """The reference state with ``distance`` sites, chosen uniformly, flipped to -1.

    The paper starts its chains at half the bits flipped: ``distance = model.n // 2``.
    """
    distance = check_distance(distance, model.n)
    spins = reference_state(model)
    spins[rng.choice(model.n, size=distance, replace=False)] = -1
    return spins
