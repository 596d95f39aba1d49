"""Exact MCMC with fast approximations: the discretizing chain and tempered transitions.

Both must leave pi invariant however poor the approximation pi* is:

- on a small discrete space, the discretizing chain's transition matrix is
  computed exactly by enumeration (every realisation of the chain around the
  mark, every mark walk) and must keep pi to machine precision, with a
  reversible and a non-reversible R, an infinite and a finite chain; the
  implemented kernel's transition frequencies must match that matrix, and a
  kernel with a wrong acceptance ratio must not;
- on a Gaussian pi with a shifted, wider Gaussian pi*, both methods recover
  pi's moments within MCSE bounds;
- with R reversible, r = 1, s = 2k, n = 1 and T^ = T~ = R^k, the two methods
  give the same acceptance probabilities on the same realised chain.
"""

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from stanaccel.diagnostics import mcse_z_scores, to_inference_data
from stanaccel.kernels import (
    HMC,
    Cycle,
    DiscretizingChain,
    FunctionDensity,
    RandomWalkMetropolis,
    State,
    TemperedTransitions,
    approximation_ladder,
    marked_states,
    run_chains,
)
from stanaccel.kernels.state import Info
from tests.kernels.test_kernels import z_limit

# --- a small discrete space -------------------------------------------------------------

PI = np.array([0.1, 0.4, 0.2, 0.3])
PI_STAR = np.array([0.4, 0.1, 0.3, 0.2])  # a poor approximation on purpose
N_STATES = len(PI)


def metropolis_matrix(target: np.ndarray, proposal: np.ndarray) -> np.ndarray:
    """The transition matrix of Metropolis with a symmetric proposal matrix (reversible)."""
    ratio = np.minimum(1.0, target[None, :] / target[:, None])
    matrix = proposal * ratio
    np.fill_diagonal(matrix, 0.0)
    np.fill_diagonal(matrix, 1.0 - matrix.sum(axis=1))
    return matrix


NEIGHBOUR = metropolis_matrix(
    PI_STAR, 0.5 * (np.roll(np.eye(N_STATES), 1, 1) + np.roll(np.eye(N_STATES), -1, 1))
)
UNIFORM = metropolis_matrix(PI_STAR, np.full((N_STATES, N_STATES), 1 / N_STATES))


class DiscreteKernel:
    """A kernel with a given transition matrix on {0, ..., n-1}; State.log_density is log pi*."""

    exact = True

    def __init__(self, matrix: np.ndarray):
        self.matrix = matrix
        self.density = FunctionDensity(1, lambda x: float(np.log(PI_STAR[int(x[0])])))

    def init(self, position):
        position = np.array(position, dtype=float)
        return State(position, self.density.log_density(position))

    def step(self, state, rng):
        new = rng.choice(N_STATES, p=self.matrix[int(state.position[0])])
        return self.init([new]), Info(True, 1.0)


def reverse_matrix(matrix: np.ndarray) -> np.ndarray:
    """R~(x|x') = R(x'|x) pi*(x) / pi*(x'), as a matrix indexed [x', x]."""
    return (matrix * PI_STAR[:, None]).T / PI_STAR[:, None]


def enumerated_transition(
    forward: np.ndarray, backward: np.ndarray, moves: int, jump: int, chain_length=None, weight=None
) -> np.ndarray:
    """The discretizing chain's exact transition matrix, by enumeration.

    The states at the time steps the mark can reach (multiples of ``jump``
    within ``moves`` of the start) form a Markov chain with s-step transitions
    forward and backward; sum over all their values and over every mark walk.
    """
    weight = PI / PI_STAR if weight is None else weight
    step_forward = np.linalg.matrix_power(forward, jump)
    step_backward = np.linalg.matrix_power(backward, jump)
    offsets = (
        [(-moves, moves)]
        if chain_length is None
        else [(-(min(k, moves * jump) // jump), min(chain_length - 1 - k, moves * jump) // jump)
              for k in range(chain_length)]
    )  # fmt: skip
    out = np.zeros((N_STATES, N_STATES))
    for low, high in offsets:
        share = 1.0 / len(offsets)
        lows, highs = list(range(low, 0)), list(range(1, high + 1))
        for x in range(N_STATES):
            for values in itertools.product(range(N_STATES), repeat=len(lows) + len(highs)):
                states = dict(zip(lows + highs, values, strict=True)) | {0: x}
                p = share
                for j in highs:
                    p *= step_forward[states[j - 1], states[j]]
                for j in lows:
                    p *= step_backward[states[j + 1], states[j]]
                if p == 0:
                    continue
                marks = {0: 1.0}  # distribution of the mark's position
                for _ in range(moves):
                    after: dict[int, float] = {}
                    for mark, q in marks.items():
                        for target in (mark - 1, mark + 1):
                            if not low <= target <= high:
                                after[mark] = after.get(mark, 0.0) + q / 2
                                continue
                            a = min(1.0, weight[states[target]] / weight[states[mark]])
                            after[target] = after.get(target, 0.0) + q / 2 * a
                            after[mark] = after.get(mark, 0.0) + q / 2 * (1 - a)
                    marks = after
                for mark, q in marks.items():
                    out[x, states[mark]] += p * q
    return out


@pytest.mark.parametrize("chain_length", [None, 4])
@pytest.mark.parametrize("reversible", [True, False])
def test_enumerated_discretizing_chain_keeps_pi_exactly(reversible, chain_length):
    forward = NEIGHBOUR if reversible else NEIGHBOUR @ UNIFORM  # a product of two is not reversible
    backward = reverse_matrix(forward)
    assert np.allclose(PI_STAR @ forward, PI_STAR) and np.allclose(PI_STAR @ backward, PI_STAR)
    assert reversible or not np.allclose(backward, forward)
    transition = enumerated_transition(forward, backward, moves=3, jump=1, chain_length=chain_length)
    assert np.allclose(transition.sum(axis=1), 1.0, atol=1e-12)
    assert np.allclose(PI @ transition, PI, atol=1e-12)
    # Negative controls: the forward kernel used backwards, or the ratio of pi alone, break it.
    if not reversible:
        wrong = enumerated_transition(forward, forward, moves=3, jump=1, chain_length=chain_length)
        assert not np.allclose(PI @ wrong, PI, atol=1e-3)
    wrong = enumerated_transition(forward, backward, moves=3, jump=1, chain_length=chain_length, weight=PI)
    assert not np.allclose(PI @ wrong, PI, atol=1e-3)


class DiscretizingChainWithoutApproximation(DiscretizingChain):
    """Broken on purpose: accepts mark moves by the ratio of pi alone, ignoring pi*."""

    @staticmethod
    def log_weight(log_pi, approx_state):
        return log_pi


def empirical_transition(kernel, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.zeros((N_STATES, N_STATES))
    for x in range(N_STATES):
        start = kernel.init([x])
        for _ in range(n):
            state, _ = kernel.step(start, rng)
            counts[x, int(state.position[0])] += 1
    return counts


def density_pi():
    return FunctionDensity(1, lambda x: float(np.log(PI[int(x[0])])))


@pytest.mark.parametrize(("broken", "chain_length"), [(False, None), (False, 5), (True, None)])
@pytest.mark.slow
def test_kernel_matches_the_enumerated_transition(broken, chain_length):
    forward = Cycle([DiscreteKernel(NEIGHBOUR), DiscreteKernel(UNIFORM)])
    kind = DiscretizingChainWithoutApproximation if broken else DiscretizingChain
    kernel = kind(density_pi(), forward, forward.reversed(), moves=3, jump=2, chain_length=chain_length)
    backward = reverse_matrix(UNIFORM) @ reverse_matrix(NEIGHBOUR)
    exact = enumerated_transition(NEIGHBOUR @ UNIFORM, backward, 3, 2, chain_length=chain_length)
    counts = empirical_transition(kernel, 3000, seed=11)
    p_values = [chisquare(counts[x], 3000 * exact[x] + 1e-300).pvalue for x in range(N_STATES)]
    if broken:
        assert min(p_values) < 1e-6, p_values
    else:
        assert min(p_values) > 1e-3 / N_STATES, p_values
    summary = kernel.summary()
    assert summary["cache_hits"] > 0 and 0 < summary["cache_hit_fraction"] < 1


# --- a Gaussian pi with a mismatched Gaussian pi* --------------------------------------

MEAN, SD = np.array([1.0, -2.0]), np.array([0.5, 2.0])


def gaussian(mean, sd) -> FunctionDensity:
    return FunctionDensity(
        2, lambda x: -0.5 * float(np.sum(((x - mean) / sd) ** 2)), lambda x: -(x - mean) / sd**2
    )


def pi_density():
    return gaussian(MEAN, SD)


def pi_star(shift: float = 0.4, widen: float = 1.5):
    """A poor approximation: shifted by ``shift`` sds and ``widen`` times wider."""
    return gaussian(MEAN + shift * SD, widen * SD)


def gaussian_kernels():
    mh_star = RandomWalkMetropolis(pi_star(), scale=1.0, covariance=np.diag(SD**2))
    hmc_star = HMC(pi_star(), step_size=0.4, n_steps=4, inv_metric=SD**2, step_size_jitter=0.2)
    ladder = approximation_ladder(pi_density(), [pi_star(0.2, 1.2), pi_star(0.4, 1.5)])
    up = lambda d, m: Cycle([RandomWalkMetropolis(d, scale=1.0, covariance=np.diag(SD**2))] * 3)  # noqa: E731
    return {
        "DC (MH, r=1, s=4)": DiscretizingChain(pi_density(), mh_star, moves=1, jump=4),
        "DC (HMC, r=4, s=2, K=30)": DiscretizingChain(
            pi_density(), hmc_star, moves=4, jump=2, chain_length=30
        ),
        "TT over approximations (n=2, k=3)": TemperedTransitions(ladder, up),
    }


@pytest.mark.parametrize("name", list(gaussian_kernels()))
@pytest.mark.slow
def test_exact_with_a_poor_approximation(name):
    kernel = gaussian_kernels()[name]
    assert kernel.exact
    starts = MEAN + SD * np.random.default_rng(0).normal(size=(4, 2))
    run = run_chains(kernel, starts, 2000, seed=5)
    idata = to_inference_data({"posterior": {"theta": run.positions[:, 200:]}})
    z_mean, z_sd = mcse_z_scores(idata, "theta", MEAN, SD)
    limit = z_limit(4)
    assert np.all(np.abs(z_mean) < limit), (name, z_mean)
    assert np.all(np.abs(z_sd) < limit), (name, z_sd)


def test_every_marked_state_is_a_draw():
    kernel = DiscretizingChain(pi_density(), RandomWalkMetropolis(pi_star(), scale=1.5), moves=5, jump=3)
    run = run_chains(kernel, MEAN[None], 1500, seed=8, record=marked_states)
    assert run.recorded.shape == (1, 1500, 5, 2)
    assert np.array_equal(run.recorded[0, :, -1], run.positions[0])
    marks = run.recorded[:, 100:].reshape(-1, 2)
    assert np.all(np.abs(marks.mean(axis=0) - MEAN) < 5 * SD / np.sqrt(len(marks) / 20))
    summary = run.summaries[0]
    assert summary["exact_evaluations"] + summary["cache_hits"] == 1500 * 5
    assert summary["cache_hits"] > 0


def test_poor_approximation_lowers_acceptance_not_correctness():
    good = DiscretizingChain(pi_density(), RandomWalkMetropolis(pi_density(), scale=1.0), moves=1, jump=5)
    poor = DiscretizingChain(
        pi_density(), RandomWalkMetropolis(pi_star(1.0, 2.0), scale=1.0), moves=1, jump=5
    )
    for kernel in (good, poor):
        run_chains(kernel, MEAN[None], 400, seed=1)
    assert good.summary()["move_acceptance"] == 1.0  # pi* = pi: every mark move is accepted
    assert poor.summary()["move_acceptance"] < 0.8


# --- the equivalence of the two methods --------------------------------------------------


@pytest.mark.parametrize("k", [1, 3])
def test_discretizing_chain_equals_tempered_transitions(k):
    """R reversible, r = 1, s = 2k; n = 1, T^ = T~ = R^k: same chain, same acceptance."""
    r_kernel = RandomWalkMetropolis(pi_star(), scale=0.8, covariance=np.diag(SD**2))
    dc = DiscretizingChain(pi_density(), r_kernel, moves=1, jump=2 * k)
    tt = TemperedTransitions(
        approximation_ladder(pi_density(), [pi_star()]), lambda d, m: Cycle([r_kernel] * k)
    )
    state = dc.init(MEAN + SD)
    probabilities = []
    for seed in range(40):
        dc_rng, tt_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        tt_rng.random()  # the discretizing chain first draws the mark's direction
        dc_state, dc_info = dc.step(state, dc_rng)
        tt_state, tt_info = tt.step(tt.init(state.position), tt_rng)
        assert dc_info.acceptance_probability == pytest.approx(tt_info.acceptance_probability, rel=1e-12)
        assert np.array_equal(dc_state.position, tt_state.position)
        probabilities.append(dc_info.acceptance_probability)
        state = dc_state
    assert 0.05 < np.mean(probabilities) < 0.95  # the comparison covered accepts and rejects
