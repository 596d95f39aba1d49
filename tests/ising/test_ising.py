"""The Ising samplers against exact enumeration on small lattices.

Invariance: states drawn exactly from the constrained distribution, moved
by one step, must still follow it (chi-square over bins of states); a
deliberately broken intracluster move must fail the same test. Long runs:
the chains' mean energies against the exact means, within a few MCSE.
"""

import math

import arviz as az
import numba
import numpy as np
import pytest
from scipy import stats

from stanaccel.ising import (
    IntraclusterMoves,
    IsingModel,
    IsingRun,
    KawasakiExchange,
    SwendsenWang,
    boltzmann_to_ising,
    constrained_distribution,
    constrained_start,
    digits_rbm,
    exact_mean_energy,
    ferromagnet_2d,
    hamming_distance,
    random_rbm,
    reference_state,
    run_chain,
    spin_glass_3d,
    states_at_distance,
)
from stanaccel.ising.exact import all_states
from stanaccel.ising.intracluster import (
    chord_energy,
    draw_path,
    grow_walk,
    local_fields,
    path_terms,
    set_walk_spins,
    walk_log_probability,
)
from stanaccel.ising.models import lattice_edges
from stanaccel.results import Result

DISTANCE = 8
ALPHA = 1e-3


def glass_4x4(beta=0.7, seed=1):
    """A 4x4 periodic lattice, Gaussian couplings and fields: few ties among the 12870 states at distance 8.

    beta = 0.7 makes the constrained distribution far from uniform (its largest probability is about 0.05).
    """
    i, j = lattice_edges((4, 4), periodic=True)
    rng = np.random.default_rng(seed)
    return IsingModel.from_edges(
        16, i, j, rng.standard_normal(i.size), 0.5 * rng.standard_normal(16), beta=beta
    )


def state_index(states, listed):
    """Each row of ``states`` as its row in ``listed`` (all states at one distance), through its bits."""
    n = listed.shape[1]
    table = np.full(2**n, -1, dtype=np.int64)
    table[bits(listed)] = np.arange(len(listed))
    return table[bits(states)]


def bits(states):
    return ((np.asarray(states) == -1) @ (1 << np.arange(np.shape(states)[-1]))).astype(np.int64)


def invariance_p_value(kernel, distance=DISTANCE, draws=10_000, bins=40, seed=0):
    """The chi-square p-value of one step of ``kernel`` applied to exact draws, over bins of states.

    The states at ``distance`` are ordered by energy and cut into ``bins``
    bins of about equal probability, so a kernel that biases the energy
    shows up. Also checks that every step kept the Hamming distance.
    """
    states, probabilities = constrained_distribution(kernel.model, distance)
    rng = np.random.default_rng(seed)
    drawn = rng.choice(len(states), size=draws, p=probabilities)
    moved = np.empty_like(states[drawn])
    for r, index in enumerate(drawn):
        state, _ = kernel.step(kernel.init(states[index]), rng)
        moved[r] = state.position
    assert np.all(hamming_distance(moved) == distance)
    order = np.argsort(kernel.model.energy(states), kind="stable")
    cumulative = np.cumsum(probabilities[order])
    bin_of_sorted = np.minimum((cumulative - probabilities[order]) * bins, bins - 1).astype(int)
    bin_of_state = np.empty(len(states), dtype=int)
    bin_of_state[order] = bin_of_sorted
    observed = np.bincount(bin_of_state[state_index(moved, states)], minlength=bins)
    expected = draws * np.bincount(bin_of_state, weights=probabilities, minlength=bins)
    used = expected > 0  # a state heavier than 1/bins leaves the bins it spans empty
    return stats.chisquare(observed[used], expected[used]).pvalue


@numba.njit
def broken_move(
    spins,
    field,
    indptr,
    indices,
    couplings,
    fields,
    beta,
    bias,
    lengths,
    work,
    alpha,
    visit_time,
    rng,
    chords,
):
    """An intracluster move that keeps only the chord correction (``chords``: wrong whenever the bias
    γ > 0, for P(σ | s') / P(σ | s) is left out) or only that ratio (wrong wherever the walk has chords)."""
    walk, log_weights, unary, pair, old_values, new_values = work
    k = lengths[rng.integers(0, lengths.size)]
    start = rng.integers(0, spins.size)
    sites, forward = grow_walk(
        start, k, spins, field, indptr, indices, bias, visit_time, walk, log_weights, rng
    )
    minus = 0
    for t in range(sites):
        old_values[t] = spins[walk[t]]
        minus += old_values[t] < 0
    before = path_terms(walk, sites, spins, indptr, indices, couplings, fields, visit_time, unary, pair)
    draw_path(unary, pair, sites, minus, beta, alpha, new_values, rng)
    set_walk_spins(walk, sites, new_values, spins, field, indptr, indices, couplings)
    if chords:
        log_ratio = -beta * (
            chord_energy(walk, sites, spins, indptr, indices, couplings, visit_time) - before
        )
    else:
        log_ratio = (
            walk_log_probability(walk, sites, spins, field, indptr, indices, bias, visit_time) - forward
        )
    if rng.random() >= math.exp(min(0.0, log_ratio)):
        set_walk_spins(walk, sites, old_values, spins, field, indptr, indices, couplings)
    for t in range(sites):
        visit_time[walk[t]] = -1


class BrokenMoves(IntraclusterMoves):
    """Intracluster moves made of a broken single move (``moves_per_step`` is 1 in the tests)."""

    def __init__(self, model, chords: bool, **options):
        super().__init__(model, **options)
        self.chords = chords

    def _moves(self, spins, rng):
        m = self.model
        k_max = self.lengths.max()
        work = (
            np.empty(k_max, np.int64), np.empty(m.max_degree), np.empty(k_max), np.empty(k_max),
            np.empty(k_max, np.int8), np.empty(k_max, np.int8),
        )  # fmt: skip
        field = local_fields(spins, m.indptr, m.indices, m.couplings, m.fields)
        alpha = np.empty((k_max, k_max + 1, 2))
        visit_time = np.full(m.n, -1, np.int64)
        for _ in range(self.moves_per_step):
            broken_move(
                spins, field, m.indptr, m.indices, m.couplings, m.fields, m.beta, self.bias, self.lengths,
                work, alpha, visit_time, rng, self.chords,
            )  # fmt: skip
        return 1, 1.0, 0, m.energy(spins)


# --- invariance of the constrained distribution, by exact enumeration


@pytest.mark.parametrize(
    ("walk_length", "bias"),
    [(6, 0.0), (6, 1.0), ([1, 3, 6, 10], 0.5)],
    ids=["k6", "k6-biased", "k-sequence-biased"],
)
def test_intracluster_moves_keep_the_constrained_distribution(walk_length, bias):
    model = glass_4x4()
    kernel = IntraclusterMoves(model, walk_length, bias=bias * model.beta, moves_per_step=1)
    assert invariance_p_value(kernel) > ALPHA


def test_intracluster_moves_keep_the_constrained_rbm_distribution():
    # A complete bipartite graph: every walk of 4 or more sites has chords.
    model = random_rbm(6, 6, scale=0.8, seed=3)
    kernel = IntraclusterMoves(model, 5, bias=model.beta, moves_per_step=1)
    assert invariance_p_value(kernel, distance=6) > ALPHA


def test_kawasaki_keeps_the_constrained_distribution():
    assert invariance_p_value(KawasakiExchange(glass_4x4())) > ALPHA


@pytest.mark.parametrize(
    ("chords", "bias"),
    [(False, 0.0), (True, 1.0)],
    ids=["no-chords", "no-reverse-walk"],
)
@pytest.mark.slow
def test_broken_intracluster_moves_fail_the_invariance_test(chords, bias):
    model = glass_4x4()
    kernel = BrokenMoves(model, chords, walk_length=6, bias=bias * model.beta, moves_per_step=1)
    assert invariance_p_value(kernel) < ALPHA


def test_without_bias_or_chords_every_move_is_accepted():
    i = np.arange(16)
    ring = IsingModel.from_edges(16, i, (i + 1) % 16, np.linspace(-1, 1, 16), np.linspace(0.5, -0.5, 16))
    kernel = IntraclusterMoves(ring, [2, 7, 15], moves_per_step=50)
    state = kernel.init(constrained_start(ring, 8, np.random.default_rng(0)))
    state, info = kernel.step(state, np.random.default_rng(1))
    assert info.acceptance_probability == 1.0
    assert info.details["accepted"] == 50


# --- long runs against exact means


def mean_within_mcse(trace, exact, z=4.0):
    ess = float(az.ess(np.asarray(trace)[None, :]))
    mcse = np.std(trace) / math.sqrt(ess)
    return abs(np.mean(trace) - exact) < z * mcse, np.mean(trace), exact, mcse


@pytest.mark.parametrize("kernel", ["intracluster", "intracluster-biased", "kawasaki"], ids=lambda name: name)
def test_constrained_chains_match_the_exact_mean_energy(kernel):
    model = glass_4x4()
    states, probabilities = constrained_distribution(model, DISTANCE)
    exact = probabilities @ model.energy(states)
    sampler = {
        "intracluster": IntraclusterMoves(model, [4, 8]),
        "intracluster-biased": IntraclusterMoves(model, 6, bias=model.beta),
        "kawasaki": KawasakiExchange(model),
    }[kernel]
    rng = np.random.default_rng(5)
    run = run_chain(sampler, constrained_start(model, DISTANCE, rng), 4000, rng)
    assert np.all(run.hamming_distance == DISTANCE)
    ok, mean, exact, mcse = mean_within_mcse(run.energy, exact)
    assert ok, f"mean energy {mean:.4f}, exact {exact:.4f}, MCSE {mcse:.4f}"


@pytest.mark.parametrize("beta", [0.3, 0.44, 0.6])
def test_swendsen_wang_matches_the_exact_mean_energy(beta):
    model = ferromagnet_2d(4, beta=beta)
    rng = np.random.default_rng(11)
    run = run_chain(SwendsenWang(model), constrained_start(model, 8, rng), 3000, rng)
    ok, mean, exact, mcse = mean_within_mcse(run.energy, exact_mean_energy(model))
    assert ok, f"mean energy {mean:.4f}, exact {exact:.4f}, MCSE {mcse:.4f}"


def test_swendsen_wang_with_fields_matches_the_exact_mean_energy():
    i, j = lattice_edges((4, 4), periodic=True)
    rng = np.random.default_rng(2)
    model = IsingModel.from_edges(
        16, i, j, rng.uniform(0.2, 1.0, i.size), 0.4 * rng.standard_normal(16), beta=0.5
    )
    run = run_chain(SwendsenWang(model), reference_state(model), 3000, rng)
    ok, mean, exact, mcse = mean_within_mcse(run.energy, exact_mean_energy(model))
    assert ok, f"mean energy {mean:.4f}, exact {exact:.4f}, MCSE {mcse:.4f}"


# --- models


def test_boltzmann_machine_energies_equal_the_ising_energies_up_to_a_constant():
    rng = np.random.default_rng(4)
    weights, visible_bias, hidden_bias = rng.normal(size=(3, 2)), rng.normal(size=3), rng.normal(size=2)
    model = boltzmann_to_ising(weights, visible_bias, hidden_bias)
    spins = all_states(5)
    units = (1 + spins) / 2
    v, h = units[:, :3], units[:, 3:]
    binary = -np.einsum("sa,ab,sb->s", v, weights, h) - v @ visible_bias - h @ hidden_bias
    difference = binary - model.energy(spins)
    np.testing.assert_allclose(difference, difference[0], atol=1e-12)


def test_energies_and_local_energies_agree():
    model = random_rbm(4, 5, seed=1)
    spins = constrained_start(model, 4, np.random.default_rng(0))
    energy = model.energy(spins)
    batch = np.stack([spins, -spins])
    np.testing.assert_allclose(model.energy(batch), [energy, model.energy(-spins)])
    assert model.log_density(spins) == pytest.approx(-model.beta * energy)
    for i in range(model.n):
        flipped = spins.copy()
        flipped[i] *= -1
        assert model.energy(flipped) - energy == pytest.approx(-2 * model.local_energy(spins)[i])


def test_the_models_of_the_paper():
    ferromagnet = ferromagnet_2d()
    assert ferromagnet.n == 3600 and ferromagnet.beta == pytest.approx(1 / 2.27)
    assert len(ferromagnet.edges[0]) == 7200 and np.all(np.diff(ferromagnet.indptr) == 4)
    assert ferromagnet.energy(reference_state(ferromagnet)) == -7200
    glass = spin_glass_3d()
    assert glass.n == 729 and len(glass.edges[0]) == 3 * 729 and np.all(np.diff(glass.indptr) == 6)
    assert set(np.unique(glass.couplings)) == {-1.0, 1.0}
    np.testing.assert_array_equal(spin_glass_3d(seed=0).couplings, glass.couplings)
    assert ferromagnet.with_beta(1.0).beta == 1.0 and ferromagnet.beta == pytest.approx(1 / 2.27)


def test_digits_rbm_is_a_bipartite_ising_model():
    model = digits_rbm(n_hidden=16, n_iter=2)
    assert model.n == 64 + 16
    first, second, _ = model.edges
    assert np.all(first < 64) and np.all(second >= 64) and len(first) == 64 * 16


def test_constrained_start_and_exact_enumeration():
    model = ferromagnet_2d(4)
    start = constrained_start(model, 8, np.random.default_rng(0))
    assert start.dtype == np.int8 and hamming_distance(start) == 8
    states = states_at_distance(16, 8)
    assert states.shape == (math.comb(16, 8), 16) and len(np.unique(bits(states))) == len(states)
    assert np.all(hamming_distance(states) == 8)
    _, probabilities = constrained_distribution(model, 8)
    assert probabilities.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="22"):
        exact_mean_energy(ferromagnet_2d(5))


# --- bad input


def test_bad_input_gives_clear_errors():
    model = glass_4x4()
    with pytest.raises(ValueError, match="J >= 0.*edge"):
        SwendsenWang(model)
    for walk_length in (0, [], 2.5, [3, 0], True):
        with pytest.raises(ValueError, match="walk"):
            IntraclusterMoves(model, walk_length)
    with pytest.raises(ValueError, match="bias"):
        IntraclusterMoves(model, 4, bias=-1.0)
    with pytest.raises(ValueError, match="moves_per_step"):
        IntraclusterMoves(model, 4, moves_per_step=0)
    for distance in (-1, 17, 2.0):
        with pytest.raises(ValueError, match="distance"):
            constrained_start(model, distance, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\+1 or -1"):
        KawasakiExchange(model).init(np.zeros(16))
    with pytest.raises(ValueError, match="shape"):
        IntraclusterMoves(model, 4).init(np.ones(15))


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        (([0, 1], [1, 1], [1.0, 1.0]), "self-loop"),
        (([0, 1], [1, 0], [1.0, 1.0]), "more than once"),
        (([0, 1], [1, 3], [1.0, 1.0]), "outside"),
        (([0, 1], [1, 2], [1.0, np.nan]), "not finite"),
        (([0.0, 1.0], [1.0, 2.0], [1.0, 1.0]), "integers"),
    ],
)
def test_from_edges_rejects_bad_edges(edges, message):
    with pytest.raises(ValueError, match=message):
        IsingModel.from_edges(3, *edges)


def test_from_edges_rejects_bad_fields_and_beta():
    with pytest.raises(ValueError, match="fields"):
        IsingModel.from_edges(3, [0], [1], [1.0], fields=[0.0, 1.0])
    for beta in (0.0, -1.0, np.inf):
        with pytest.raises(ValueError, match="beta"):
            IsingModel.from_edges(3, [0], [1], [1.0], beta=beta)


# --- reproducibility


@pytest.mark.parametrize("sampler", ["intracluster", "kawasaki", "swendsen-wang"])
def test_a_seed_reproduces_the_trace(sampler):
    model = ferromagnet_2d(8, beta=0.4)
    kernel = {
        "intracluster": IntraclusterMoves(model, [3, 9], bias=0.4),
        "kawasaki": KawasakiExchange(model),
        "swendsen-wang": SwendsenWang(model),
    }[sampler]
    start = constrained_start(model, 32, np.random.default_rng(0))
    first = run_chain(kernel, start, 50, np.random.default_rng(7))
    second = run_chain(kernel, start, 50, np.random.default_rng(7))
    np.testing.assert_array_equal(first.energy, second.energy)
    np.testing.assert_array_equal(first.final, second.final)
    assert first.energy[-1] == pytest.approx(model.energy(first.final))
    assert len(np.unique(first.energy)) > 1


def test_a_chain_is_the_shared_result_type():
    """run_chain returns a Result: its traces are InferenceData, with ESS and the run's time in metrics()."""
    model = ferromagnet_2d(8, beta=0.4)
    start = constrained_start(model, 32, np.random.default_rng(0))
    run = run_chain(KawasakiExchange(model), start, 200, np.random.default_rng(3), record_every=2)
    assert isinstance(run, IsingRun) and isinstance(run, Result)
    posterior = run.to_inference_data().posterior
    assert posterior["energy"].shape == (1, 100)
    np.testing.assert_array_equal(posterior["energy"].values[0], run.energy)
    assert np.all(posterior["hamming_distance"].values == 32)
    metrics = run.metrics()
    assert metrics["wall_seconds"] == run.seconds and metrics["ess_bulk_min"] > 0
