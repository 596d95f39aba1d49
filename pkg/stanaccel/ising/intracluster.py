"""Intracluster moves (Hamze & de Freitas 2010) on Ising models constrained to a Hamming distance.

The paper we follow (Mahendran, Wang, Hamze & de Freitas 2012) tunes this
sampler, but its text lacks the construction; this is ours, and it is exact.
One move from the state s, keeping the number of -1 spins:

1. Draw a walk length k (uniformly from the allowed ones) and a start site
   uniformly, and grow a self-avoiding walk σ of up to k sites: from the
   current end, step to an unvisited neighbour j with probability
   ∝ exp(γ e_j(s)), where e_j(s) = -s_j (Σ_l J_jl s_l + h_j) is the local
   energy, so γ > 0 favours frustrated sites. With no unvisited neighbour
   the walk stops early. log P(σ | s) is the sum of the log step probabilities.
2. Draw the walk's new spins exactly from q(s'_σ) ∝ exp(-β E_path(s'_σ)),
   restricted to the same number of -1 spins among the walk's sites, the
   spins off the walk fixed. E_path keeps the couplings between consecutive
   walk sites and the unary fields h_i + Σ_{l ∉ σ} J_il s_l; couplings
   between non-consecutive walk sites ("chords") are left out of q. The
   draw is forward filtering over (position, count, spin) in log space and
   backward sampling: O(k²) per move.
3. Accept with probability
   min(1, exp(-β [E_chord(s') - E_chord(s)] + log P(σ | s') - log P(σ | s))),
   where P(σ | s') replays the same ordered walk with the weights of s'.

This is detailed balance: the walk's start and length do not depend on the
state, its early stop depends only on the visited set, q's normaliser is
the same in both directions (it depends only on the spins off the walk),
and π(s') q(s_σ) / (π(s) q(s'_σ)) leaves only the chord energies. With γ = 0
and no chords every move is accepted.

The moves are Numba-compiled (``@numba.njit(cache=True)``), on the model's
CSR arrays, with the step's ``numpy.random.Generator`` passed in, so a seed
reproduces a run. The compiled pieces are separate functions so a test can
assemble a deliberately wrong move from them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from stanaccel.ising.models import IsingModel, as_spins
from stanaccel.kernels.state import Info, State


@numba.njit(cache=True)
def local_fields(spins, indptr, indices, couplings, fields):
    """Σ_j J_ij s_j + h_i for every site."""
    n = spins.size
    out = np.empty(n)
    for i in range(n):
        total = fields[i]
        for e in range(indptr[i], indptr[i + 1]):
            total += couplings[e] * spins[indices[e]]
        out[i] = total
    return out


@numba.njit(cache=True)
def ising_energy(spins, indptr, indices, couplings, fields):
    """E(s) from the CSR arrays (each edge is stored twice, so half the pair sum)."""
    energy = 0.0
    for i in range(spins.size):
        pairs = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            pairs += couplings[e] * spins[indices[e]]
        energy -= spins[i] * (0.5 * pairs + fields[i])
    return energy


@numba.njit(cache=True)
def grow_walk(start, length, spins, field, indptr, indices, bias, visit_time, walk, log_weights, rng):
    """Grow a self-avoiding walk of up to ``length`` sites from ``start``; return (sites, log P(σ | s)).

    The walk is written to ``walk`` and each site's position in it to
    ``visit_time`` (which must be -1 off the walk).
    """
    walk[0] = start
    visit_time[start] = 0
    log_probability = 0.0
    sites = 1
    while sites < length:
        end = walk[sites - 1]
        count = 0
        largest = -np.inf
        for e in range(indptr[end], indptr[end + 1]):
            j = indices[e]
            if visit_time[j] < 0:
                log_weights[count] = bias * (-spins[j] * field[j])
                largest = max(largest, log_weights[count])
                count += 1
        if count == 0:
            break
        total = 0.0
        for c in range(count):
            total += math.exp(log_weights[c] - largest)
        u = rng.random() * total
        chosen = -1
        site = -1
        for e in range(indptr[end], indptr[end + 1]):
            site = indices[e]
            if visit_time[site] < 0:
                chosen += 1
                u -= math.exp(log_weights[chosen] - largest)
                if u <= 0.0 or chosen == count - 1:
                    break
        log_probability += log_weights[chosen] - largest - math.log(total)
        walk[sites] = site
        visit_time[site] = sites
        sites += 1
    return sites, log_probability


@numba.njit(cache=True)
def walk_log_probability(walk, sites, spins, field, indptr, indices, bias, visit_time):
    """log P(σ | s): the probability of growing this ordered walk in the state ``spins``."""
    log_probability = 0.0
    for t in range(sites - 1):
        end = walk[t]
        largest = -np.inf
        for e in range(indptr[end], indptr[end + 1]):
            j = indices[e]
            if visit_time[j] < 0 or visit_time[j] > t:
                largest = max(largest, bias * (-spins[j] * field[j]))
        total = 0.0
        for e in range(indptr[end], indptr[end + 1]):
            j = indices[e]
            if visit_time[j] < 0 or visit_time[j] > t:
                total += math.exp(bias * (-spins[j] * field[j]) - largest)
        chosen = walk[t + 1]
        log_probability += bias * (-spins[chosen] * field[chosen]) - largest - math.log(total)
    return log_probability


@numba.njit(cache=True)
def path_terms(walk, sites, spins, indptr, indices, couplings, fields, visit_time, unary, pair):
    """Fill the path's unary fields and consecutive couplings; return the chord energy E_chord(s).

    ``unary[t] = h + Σ J s`` over the neighbours of walk site t off the walk;
    ``pair[t]`` is the coupling of walk sites t and t + 1.
    """
    chord_energy = 0.0
    for t in range(sites):
        i = walk[t]
        unary[t] = fields[i]
        pair[t] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            position = visit_time[j]
            if position < 0:
                unary[t] += couplings[e] * spins[j]
            elif position == t + 1:
                pair[t] = couplings[e]
            elif position > t + 1:
                chord_energy -= couplings[e] * spins[i] * spins[j]
    return chord_energy


@numba.njit(cache=True)
def chord_energy(walk, sites, spins, indptr, indices, couplings, visit_time):
    """E_chord(s): minus the couplings times spins of walk sites that are neighbours but not consecutive."""
    energy = 0.0
    for t in range(sites):
        i = walk[t]
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if visit_time[j] > t + 1:
                energy -= couplings[e] * spins[i] * spins[j]
    return energy


@numba.njit(cache=True)
def log_add(a, b):
    """log(exp(a) + exp(b)), exact for -inf."""
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@numba.njit(cache=True)
def draw_path(unary, pair, sites, minus, beta, alpha, values, rng):
    """Draw the walk's spins exactly from q ∝ exp(-β E_path) with ``minus`` of them -1.

    Forward filtering: ``alpha[t, c, x]`` is the log of the summed weight of
    the walk's first t + 1 spins with c of them -1 and spin t equal to +1
    (x = 0) or -1 (x = 1). Backward sampling then draws the spins from the
    last to the first. The spins go to ``values``. Only the counts from
    which ``minus`` can still be reached are filled (the others stay -inf),
    which halves the work.
    """
    for t in range(sites):
        for c in range(minus + 1):
            for x in range(2):
                alpha[t, c, x] = -np.inf
    for x in range(2):
        if x <= minus:
            alpha[0, x, x] = beta * unary[0] * (1 - 2 * x)
    for t in range(1, sites):
        for c in range(max(0, minus - (sites - 1 - t)), min(t + 1, minus) + 1):
            for x in range(2):
                if c - x < 0:
                    continue
                spin = 1 - 2 * x
                total = -np.inf
                for previous in range(2):
                    total = log_add(
                        total, alpha[t - 1, c - x, previous] + beta * pair[t - 1] * (1 - 2 * previous) * spin
                    )
                alpha[t, c, x] = total + beta * unary[t] * spin
    count = minus
    following = 0
    for t in range(sites - 1, -1, -1):
        plus = alpha[t, count, 0]
        minus_weight = alpha[t, count, 1]
        if t < sites - 1:
            plus += beta * pair[t] * following
            minus_weight -= beta * pair[t] * following
        if minus_weight == -np.inf:
            p_minus = 0.0
        elif plus == -np.inf:
            p_minus = 1.0
        else:
            p_minus = 1.0 / (1.0 + math.exp(plus - minus_weight))
        x = 1 if rng.random() < p_minus else 0
        values[t] = 1 - 2 * x
        following = 1 - 2 * x
        count -= x


@numba.njit(cache=True)
def set_walk_spins(walk, sites, values, spins, field, indptr, indices, couplings):
    """Set the walk's spins to ``values``, updating the local fields; return how many changed."""
    changed = 0
    for t in range(sites):
        i = walk[t]
        delta = values[t] - spins[i]
        if delta != 0:
            changed += 1
            spins[i] = values[t]
            for e in range(indptr[i], indptr[i + 1]):
                field[indices[e]] += couplings[e] * delta
    return changed


@numba.njit(cache=True)
def intracluster_move(
    spins, field, indptr, indices, couplings, fields, beta, bias, lengths, work, alpha, visit_time, rng
):
    """One intracluster move, in place; return (accepted, acceptance probability, spins changed)."""
    walk, log_weights, unary, pair, old_values, new_values = work
    k = lengths[rng.integers(0, lengths.size)]
    start = rng.integers(0, spins.size)
    sites, forward = grow_walk(
        start, k, spins, field, indptr, indices, bias, visit_time, walk, log_weights, rng
    )
    minus = 0
    for t in range(sites):
        old_values[t] = spins[walk[t]]
        if old_values[t] < 0:
            minus += 1
    chord_before = path_terms(walk, sites, spins, indptr, indices, couplings, fields, visit_time, unary, pair)
    draw_path(unary, pair, sites, minus, beta, alpha, new_values, rng)
    changed = set_walk_spins(walk, sites, new_values, spins, field, indptr, indices, couplings)
    chord_after = chord_energy(walk, sites, spins, indptr, indices, couplings, visit_time)
    backward = forward
    if bias != 0.0:
        backward = walk_log_probability(walk, sites, spins, field, indptr, indices, bias, visit_time)
    log_ratio = -beta * (chord_after - chord_before) + backward - forward
    probability = math.exp(min(0.0, log_ratio))
    accepted = rng.random() < probability
    if not accepted:
        set_walk_spins(walk, sites, old_values, spins, field, indptr, indices, couplings)
        changed = 0
    for t in range(sites):
        visit_time[walk[t]] = -1
    return accepted, probability, changed


@numba.njit(cache=True)
def intracluster_sweep(
    spins, indptr, indices, couplings, fields, beta, bias, lengths, moves, max_degree, rng
):
    """``moves`` intracluster moves on ``spins`` in place.

    Returns (moves accepted, summed acceptance probability, spins changed, new energy).
    """
    k_max = min(lengths.max(), spins.size)  # a self-avoiding walk has at most N sites
    field = local_fields(spins, indptr, indices, couplings, fields)
    work = (
        np.empty(k_max, np.int64),
        np.empty(max(max_degree, 1)),
        np.empty(k_max),
        np.empty(k_max),
        np.empty(k_max, np.int8),
        np.empty(k_max, np.int8),
    )
    alpha = np.empty((k_max, k_max + 1, 2))
    visit_time = np.full(spins.size, -1, np.int64)
    accepted = 0
    probability_sum = 0.0
    changed_sum = 0
    for _ in range(moves):
        move_accepted, probability, changed = intracluster_move(
            spins, field, indptr, indices, couplings, fields, beta, bias, lengths,
            work, alpha, visit_time, rng,
        )  # fmt: skip
        accepted += move_accepted
        probability_sum += probability
        changed_sum += changed
    return accepted, probability_sum, changed_sum, ising_energy(spins, indptr, indices, couplings, fields)


def walk_lengths(walk_length) -> np.ndarray:
    """The allowed walk lengths as an int64 array, or ValueError unless they are integers ≥ 1."""
    values = [walk_length] if np.ndim(walk_length) == 0 else list(np.ravel(walk_length))
    if not values:
        raise ValueError("walk_length must be a positive integer or a non-empty sequence of them, not empty")
    for k in values:
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"walk lengths must be integers of at least 1, not {k!r}")
    return np.asarray(values, dtype=np.int64)


class IntraclusterMoves:
    """The intracluster-move sampler on an Ising model, keeping the Hamming distance (the number of -1 spins).

    Exact: each move satisfies detailed balance for p(s) restricted to the
    start's Hamming distance (see the module docstring for the construction).

    Parameters
    ----------
    model : IsingModel
    walk_length : int or sequence of int
        The walk length k, or lengths to draw k from uniformly for each move.
    bias : float
        γ ≥ 0: the walk steps to a neighbour with probability ∝ exp(γ e_j),
        e_j its local energy (absolute units; experiments pass a multiple of beta).
    moves_per_step : int, optional
        Moves in one ``step``; by default about N / mean k, so a step
        touches about N sites.

    A step's ``Info`` is accepted if any move was; its acceptance
    probability is the mean over the moves, and ``details`` counts the
    moves, the accepted moves and the spins flipped.
    """

    exact = True

    def __init__(
        self,
        model: IsingModel,
        walk_length: int | Sequence[int] = 10,
        bias: float = 0.0,
        moves_per_step: int | None = None,
    ):
        self.model = model
        self.lengths = walk_lengths(walk_length)
        if not (isinstance(bias, int | float | np.number) and math.isfinite(bias) and bias >= 0):
            raise ValueError(f"bias must be a finite number of at least 0, not {bias!r}")
        self.bias = float(bias)
        if moves_per_step is None:
            moves_per_step = max(1, round(model.n / self.lengths.mean()))
        if (
            isinstance(moves_per_step, bool)
            or not isinstance(moves_per_step, int | np.integer)
            or moves_per_step < 1
        ):
            raise ValueError(f"moves_per_step must be a positive integer, not {moves_per_step!r}")
        self.moves_per_step = int(moves_per_step)

    def init(self, position: np.ndarray) -> State:
        spins = as_spins(position, self.model)
        return State(spins, self.model.log_density(spins))

    def _moves(self, spins: np.ndarray, rng: np.random.Generator) -> tuple[int, float, int, float]:
        """Run the step's moves on ``spins`` in place: (accepted, summed probability, changed, energy)."""
        m = self.model
        return intracluster_sweep(
            spins, m.indptr, m.indices, m.couplings, m.fields, m.beta, self.bias, self.lengths,
            self.moves_per_step, m.max_degree, rng,
        )  # fmt: skip

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]:
        spins = state.position.copy()
        accepted, probability_sum, changed, energy = self._moves(spins, rng)
        info = Info(
            accepted > 0,
            probability_sum / self.moves_per_step,
            details={"moves": self.moves_per_step, "accepted": int(accepted), "flipped": int(changed)},
        )
        return State(spins, -self.model.beta * energy), info
