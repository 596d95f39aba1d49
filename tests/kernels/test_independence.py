"""The independence sampler's batches: the same chain whatever the batch, on every core, all counted.

Its correctness on a known posterior is in test_kernels.py, its invariance
(and a broken ratio caught) in test_invariance.py, its checkpoints in
test_checkpoints.py; ``stanaccel sample --method imh`` in tests/sampling/test_methods.py.
"""

import numpy as np
import pytest

from stanaccel.approx import KeepConstants
from stanaccel.densities import FunctionDensity, safe_log_densities
from stanaccel.kernels import run_chains
from stanaccel.kernels.independence import IndependenceMetropolis
from tests.kernels.models import mvn_density, mvn_problem

DATA, MEAN, SD = mvn_problem()
DIM = len(MEAN)
STARTS = MEAN + SD * np.random.default_rng(0).normal(size=(3, DIM))


def imh(density, batch: int) -> IndependenceMetropolis:
    return IndependenceMetropolis(density, MEAN + 0.3 * SD, np.diag(SD**2), batch=batch)


def same_chain(first, second) -> None:
    for name in ("positions", "accepted", "acceptance_probability", "failed"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name), err_msg=name)


def test_every_batch_size_makes_the_same_chain():
    one = run_chains(lambda c: imh(mvn_density(DATA), 1), STARTS, 400, seed=5, thin=3)
    assert 0.2 < one.accepted.mean() < 0.95
    for batch in (2, 16, 1000):
        same_chain(run_chains(lambda c, b=batch: imh(mvn_density(DATA), b), STARTS, 400, seed=5, thin=3), one)
    # one shared kernel, chains in turn: each chain keeps its own batch in its state
    same_chain(run_chains(imh(mvn_density(DATA), 16), STARTS, 400, seed=5, thin=3), one)


def test_a_batch_on_every_core_makes_the_same_chain_and_counts_each_evaluation(logistic_model):
    """A Stan density (thread_safe) evaluates each batch in the shared thread pool."""
    rng = np.random.default_rng(1)
    mean, covariance = np.zeros(logistic_model.dim), np.eye(logistic_model.dim) * 0.3
    starts = rng.normal(size=(2, logistic_model.dim)) * 0.3
    densities = []

    def factory(batch):
        def make(chain):
            density = KeepConstants(logistic_model.with_data(logistic_model.data_json))
            densities.append(density)
            return IndependenceMetropolis(density, mean, covariance, df=5, batch=batch)

        return make

    one = run_chains(factory(1), starts, 250, seed=2)
    sixteen = run_chains(factory(16), starts, 250, seed=2)
    same_chain(sixteen, one)
    assert one.accepted.any() and not one.accepted.all()
    assert one.evaluations.tolist() == [251, 251]  # the start, then one per step
    assert sixteen.evaluations.tolist() == [16 * 16 + 1] * 2  # 16 batches of 16: 6 evaluated in vain
    assert all(d.thread_safe and d.seconds > 0 for d in densities)


def test_evaluations_from_many_threads_are_all_counted_and_in_order():
    density = mvn_density(DATA)
    density.thread_safe = True  # its NumPy functions keep no state between calls
    points = MEAN + SD * np.random.default_rng(3).normal(size=(4000, DIM))
    values = safe_log_densities(density, points)
    assert density.n_log_density == len(points)
    np.testing.assert_array_equal(values, [density._log_density(x) for x in points])


def outside_the_support(x):
    if x[0] > MEAN[0]:
        raise FloatingPointError("outside the support")
    return mvn_density(DATA)._log_density(x)


def test_a_proposal_where_the_density_is_undefined_is_a_rejection():
    density = FunctionDensity(DIM, outside_the_support)
    density.thread_safe = True
    start = MEAN - SD
    run = run_chains(imh(density, 8), start[None], 500, seed=4)
    assert run.failed.any() and run.accepted.any()
    assert np.all(run.positions[..., 0] <= MEAN[0])
    assert np.all(run.acceptance_probability[run.failed] == 0)


def test_a_defect_in_the_density_stops_the_run_with_its_error():
    def defect(x):
        raise KeyError("a bug, not an undefined density")

    density = FunctionDensity(DIM, lambda x: defect(x) if x[0] > MEAN[0] else -0.5 * float(x @ x))
    density.thread_safe = True
    with pytest.raises(KeyError, match="a bug"):
        run_chains(imh(density, 8), (MEAN - SD)[None], 100, seed=4)


@pytest.mark.parametrize(
    ("settings", "message"),
    [({"df": 0}, "need df > 0"), ({"scale": -1.0}, "need scale > 0"), ({"batch": 0}, "whole batch >= 1")],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        IndependenceMetropolis(mvn_density(DATA), MEAN, SD**2, **settings)


def test_a_proposal_that_misses_the_posterior_is_flagged_by_its_acceptance():
    from stanaccel.diagnostics.metrics import method_statistics, method_warnings

    good = run_chains(imh(mvn_density(DATA), 8), STARTS, 300, seed=6)
    missing = IndependenceMetropolis(mvn_density(DATA), MEAN + 4 * SD, np.diag(SD**2), scale=0.1, batch=8)
    poor = run_chains(missing, STARTS, 300, seed=6)
    for run in (good, poor):  # the summary counts what the draws say
        rates = [s["proposal_acceptance"] for s in run.summaries]
        np.testing.assert_allclose(rates, run.accepted.mean(axis=1))
    assert method_warnings(method_statistics(good.summaries)) == []
    (warning,) = method_warnings(method_statistics(poor.summaries))
    assert warning.startswith("independence acceptance") and "below 0.1" in warning
