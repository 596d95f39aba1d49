"""Latent samplers keep their statistics in the state: one sampler shared by chains reports each chain's own.

NumPy networks and densities only (no TensorFlow, no Stan), as in ``test_samplers.py``.
"""

import numpy as np
import pytest

from stanaccel.kernels import Cycle, RandomWalkMetropolis, run_chains
from tests.latent.test_samplers import COV, MEAN, kernels


def make(name: str, exact: bool, with_full_space_move: bool = False):
    def build():
        latent = kernels(exact=exact)[name]
        if not with_full_space_move:
            return latent
        return Cycle([latent, RandomWalkMetropolis(latent.density, scale=0.8, covariance=COV)])

    return build


CASES = [(name, exact, False) for name in ("ae-hmc", "ae-pcn") for exact in (True, False)]
CASES += [("ae-hmc", True, True), ("ae-pcn", True, True)]


@pytest.mark.parametrize(("name", "exact", "cycle"), CASES)
def test_a_shared_sampler_reports_each_chains_own_statistics(name, exact, cycle):
    build = make(name, exact, cycle)
    starts = MEAN + 0.5 * np.random.default_rng(2).standard_normal((2, len(MEAN)))
    shared = run_chains(build(), starts, 150, seed=6)
    own = run_chains(lambda chain: build(), starts, 150, seed=6)
    np.testing.assert_array_equal(shared.positions, own.positions)
    assert shared.summaries == own.summaries
    assert shared.summaries[0] != shared.summaries[1]


def test_each_step_reports_its_latent_evaluations():
    sampler = kernels(exact=True)["ae-hmc"]
    state, rng, evaluations = sampler.init(MEAN), np.random.default_rng(0), 0
    for _ in range(50):
        state, info = sampler.step(state, rng)
        evaluations += info.details["latent_evaluations"]
    assert sampler.summary(state)["latent_evaluations"] == evaluations == 50 * (1 + sampler.n_steps)
