"""Kernel statistics live in the state: one kernel shared by several chains reports each chain's own.

``run_chains`` runs the chains of a shared kernel in turn; a factory gives
each chain a kernel of its own. Both use the same random numbers per chain,
so the draws agree, and so must every chain's summary.
``evaluations_per_density`` is left out of the comparison: it counts the
evaluations of the density objects, which a shared kernel's chains share.
"""

import numpy as np
import pytest

from stanaccel.densities import FunctionDensity
from stanaccel.kernels import (
    HMC,
    Cycle,
    DiscretizingChain,
    Mixture,
    ParallelTempering,
    RandomWalkMetropolis,
    TemperedTransitions,
    approximation_ladder,
    power_ladder,
    run_chains,
)

MEAN, SD = np.array([1.0, -2.0]), np.array([0.5, 2.0])
BETAS = [1.0, 0.5, 0.2, 0.05]


def gaussian(shift: float = 0.0, widen: float = 1.0) -> FunctionDensity:
    mean, sd = MEAN + shift * SD, widen * SD
    return FunctionDensity(
        2, lambda x: -0.5 * float(np.sum(((x - mean) / sd) ** 2)), lambda x: -(x - mean) / sd**2
    )


def mixture() -> FunctionDensity:
    """Two narrow modes at (3, 3) and (-3, -3)."""
    return FunctionDensity(
        2,
        lambda x: float(np.logaddexp(-2 * np.sum((x - 3) ** 2), -2 * np.sum((x + 3) ** 2))),
    )


def mh(density, level: int = 0):
    return RandomWalkMetropolis(density, scale=0.6 / np.sqrt(BETAS[level]))


def mixture_ladder():
    return power_ladder(mixture(), FunctionDensity(2, lambda x: -float(np.sum(x**2)) / 50), BETAS)


def tempered_transitions():
    return TemperedTransitions(mixture_ladder(), mh)


def cycle_with_tempered_transitions():
    ladder = mixture_ladder()
    return Cycle([mh(ladder.levels[0]), TemperedTransitions(ladder, mh)])


def mixture_with_tempered_transitions():
    ladder = mixture_ladder()
    return Mixture([mh(ladder.levels[0]), TemperedTransitions(ladder, mh)], [0.6, 0.4])


def tempered_transitions_over_approximations():
    ladder = approximation_ladder(gaussian(), [gaussian(0.2, 1.2), gaussian(0.4, 1.5)])
    return TemperedTransitions(ladder, lambda d, m: Cycle([RandomWalkMetropolis(d, scale=1.0)] * 2))


def discretizing_chain():
    return DiscretizingChain(gaussian(), RandomWalkMetropolis(gaussian(0.4, 1.5), scale=1.5), moves=5, jump=3)


def discretizing_chain_of_length_30():
    hmc = HMC(gaussian(0.4, 1.5), step_size=0.4, n_steps=4, inv_metric=SD**2, step_size_jitter=0.2)
    return DiscretizingChain(gaussian(), hmc, moves=4, jump=2, chain_length=30)


def cycle_with_discretizing_chain():
    dc = discretizing_chain()
    return Cycle([dc, HMC(dc.density, step_size=0.3, n_steps=3, inv_metric=SD**2)])


def parallel_tempering():
    return ParallelTempering(mixture_ladder(), mh)


KERNELS = {
    "TT": tempered_transitions,
    "Cycle(MH, TT)": cycle_with_tempered_transitions,
    "Mixture(MH, TT)": mixture_with_tempered_transitions,
    "TT over approximations": tempered_transitions_over_approximations,
    "DC": discretizing_chain,
    "DC (K=30)": discretizing_chain_of_length_30,
    "Cycle(DC, HMC)": cycle_with_discretizing_chain,
    "PT": parallel_tempering,
}


def plain(summary: dict) -> dict:
    """The summary without the density counters, arrays as lists, for ``==``."""
    return {
        key: [np.asarray(v).tolist() for v in value] if isinstance(value, list) else value
        for key, value in summary.items()
        if key != "evaluations_per_density"
    }


@pytest.mark.parametrize("name", list(KERNELS))
def test_a_shared_kernel_reports_each_chains_own_statistics(name):
    make = KERNELS[name]
    starts = np.array([[1.0, -2.0], [-2.5, -3.5]])
    shared = run_chains(make(), starts, 200, seed=3)
    own = run_chains(lambda chain: make(), starts, 200, seed=3)
    np.testing.assert_array_equal(shared.positions, own.positions)
    for chain in range(len(starts)):
        assert plain(shared.summaries[chain]) == plain(own.summaries[chain]), (name, chain)


def test_without_a_state_the_summary_counts_every_chain():
    kernel = discretizing_chain()
    run = run_chains(kernel, np.array([[1.0, -2.0], [0.0, 0.0]]), 100, seed=1)
    total = kernel.summary()
    for key in ("exact_evaluations", "cache_hits", "chain_steps", "moves_outside_chain"):
        assert total[key] == sum(s[key] for s in run.summaries), key
    assert total["exact_evaluations"] + total["cache_hits"] == 2 * 100 * 5


@pytest.mark.parametrize("make", [tempered_transitions_over_approximations, discretizing_chain])
def test_two_steps_from_one_state_share_no_statistics(make):
    kernel = make()
    key = "tt_acceptance" if isinstance(kernel, TemperedTransitions) else "move_acceptance"
    start = kernel.init(MEAN)
    first, first_info = kernel.step(start, np.random.default_rng(0))
    second, second_info = kernel.step(start, np.random.default_rng(1))
    after_first, after_info = kernel.step(first, np.random.default_rng(2))
    assert kernel.summary(start)[key] == 0
    if key == "tt_acceptance":  # one proposal per step
        assert kernel.summary(first)[key] == first_info.accepted
        assert kernel.summary(second)[key] == second_info.accepted
        assert kernel.summary(after_first)[key] == (first_info.accepted + after_info.accepted) / 2
    else:  # five mark moves per step, each needing pi at the mark
        counts = [kernel.summary(s) for s in (start, first, second, after_first)]
        assert [c["exact_evaluations"] + c["cache_hits"] for c in counts] == [0, 5, 5, 10]


def test_two_tempered_transitions_in_a_cycle_keep_their_own_counts():
    ladder = approximation_ladder(gaussian(), [gaussian(0.3, 1.4)])
    first = TemperedTransitions(ladder, lambda d, m: RandomWalkMetropolis(d, scale=0.3))
    second = TemperedTransitions(ladder, lambda d, m: RandomWalkMetropolis(d, scale=3.0))
    cycle = Cycle([first, second, RandomWalkMetropolis(ladder.levels[0], scale=1.0)])
    state, rng, accepted = cycle.init(MEAN), np.random.default_rng(4), np.zeros(2)
    for _ in range(300):
        state, info = cycle.step(state, rng)
        accepted += [part.accepted for part in info.details["parts"][:2]]
    assert first.summary(state)["tt_acceptance"] == accepted[0] / 300
    assert second.summary(state)["tt_acceptance"] == accepted[1] / 300
    assert accepted[0] != accepted[1]


def test_a_mixture_keeps_a_component_s_statistics_through_the_others_steps():
    kernel = mixture_with_tempered_transitions()
    rng = np.random.default_rng(0)
    state = kernel.init(np.array([1.0, 1.0]))
    accepted = []
    for _ in range(50):
        state, info = kernel.step(state, rng)
        if info.details["component"] == 1:
            accepted.append(info.details["part"].accepted)
    assert 0 < len(accepted) < 50
    assert kernel.summary(state)["tt_acceptance"] == pytest.approx(np.mean(accepted))
