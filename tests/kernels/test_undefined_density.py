"""Undefined densities (issue 12): a start point without a density is refused with a clear error,
and a chain whose every proposal fails says so instead of running on at acceptance 0.
"""

import re
import warnings

import numpy as np
import pytest

from stanaccel.kernels import (
    HMC,
    PCN,
    Cycle,
    DiscretizingChain,
    FailingDensityWarning,
    FunctionDensity,
    ParallelTempering,
    RandomWalkMetropolis,
    State,
    TemperedTransitions,
    UndefinedStartError,
    approximation_ladder,
    power_ladder,
    run_chains,
)
from stanaccel.kernels.driver import FAILURES_BEFORE_WARNING

DIM = 3
START = np.array([3.0, 0.25, -1.5])  # outside the half space x[0] <= 1
START_PATTERN = r"\[\s*3\.\s+0\.25\s+-1\.5\s*\]"


def normal() -> FunctionDensity:
    """A standard normal, defined everywhere."""
    return FunctionDensity(DIM, lambda x: -0.5 * x @ x, lambda x: -x)


def half_space(undefined: str = "nan") -> FunctionDensity:
    """A standard normal on x[0] <= 1, undefined beyond: NaN, or a FloatingPointError (a domain error)."""

    def log_density(x):
        if x[0] > 1:
            if undefined == "raise":
                raise FloatingPointError("outside the support")
            return np.nan
        return -0.5 * x @ x

    return FunctionDensity(DIM, log_density, lambda x: -x)


def nan_gradient_beyond_one() -> FunctionDensity:
    """A standard normal whose gradient is NaN where x[0] > 1 (its value stays defined)."""
    return FunctionDensity(DIM, lambda x: -0.5 * x @ x, lambda x: -x if x[0] <= 1 else np.full(DIM, np.nan))


def defined_only_at(point: np.ndarray, undefined: str = "nan") -> FunctionDensity:
    """Defined at ``point`` alone, as when NaN in the data makes every proposal undefined."""

    def log_density(x):
        if not np.array_equal(x, point):
            if undefined == "raise":
                raise FloatingPointError("undefined")
            return np.nan
        return 0.0

    return FunctionDensity(len(point), log_density, lambda x: -x)


class Unchecked:
    """A kernel whose init does not check its start (as a kernel from outside this package may)."""

    exact = True

    def __init__(self, density):
        self.density = density

    def init(self, position):
        position = np.array(position, dtype=float)
        value = self.density.log_density(position)
        return State(position, value if np.isfinite(value) else -np.inf)

    def step(self, state, rng):
        raise AssertionError("not stepped in these tests")


# -- the start point -------------------------------------------------------------------------------


@pytest.mark.parametrize("undefined", ["nan", "raise"])
def test_hmc_refuses_a_start_point_without_a_log_density(undefined):
    kernel = HMC(half_space(undefined), step_size=0.1, n_steps=5)
    with pytest.raises(
        UndefinedStartError, match="HMC: the log density is undefined at the start point"
    ) as error:
        kernel.init(START)
    assert isinstance(error.value, ValueError)
    assert re.search(START_PATTERN, str(error.value)), str(error.value)
    assert "NaN or infinity in the data" in str(error.value)


def test_hmc_refuses_a_start_point_without_a_gradient():
    kernel = HMC(nan_gradient_beyond_one(), step_size=0.1, n_steps=5)
    with pytest.raises(
        UndefinedStartError, match=r"gradient of the log density is undefined \(its value is -5\.656"
    ):
        kernel.init(START)


def test_hmc_starts_where_the_density_is_defined():
    state = HMC(half_space(), step_size=0.1, n_steps=5).init(np.zeros(DIM))
    assert state.log_density == 0.0
    np.testing.assert_array_equal(state.gradient, np.zeros(DIM))


def undefined_start_kernels() -> dict:
    """Every kernel whose init evaluates a density, by the name its error should start with."""
    mh = lambda density, m=0: RandomWalkMetropolis(density, scale=0.5)  # noqa: E731
    return {
        "RandomWalkMetropolis": mh(half_space()),
        "PCN": PCN(half_space("raise"), np.zeros(DIM), np.eye(DIM), rho=0.5),
        "HMC": Cycle([HMC(half_space(), 0.1, 3), mh(half_space())]),  # a cycle's first kernel checks
        "Cycle (first kernel Unchecked)": Cycle([Unchecked(half_space()), HMC(half_space(), 0.1, 3)]),
        "TemperedTransitions": TemperedTransitions(approximation_ladder(half_space(), [normal()]), mh),
        "ParallelTempering level 0": ParallelTempering(power_ladder(half_space(), normal()), mh),
        "DiscretizingChain": DiscretizingChain(half_space(), mh(normal())),
        "DiscretizingChain, the approximation's kernel": DiscretizingChain(normal(), mh(half_space())),
    }


@pytest.mark.parametrize("name", list(undefined_start_kernels()))
def test_every_kernel_refuses_a_start_point_without_a_log_density(name):
    with pytest.raises(UndefinedStartError, match=re.escape(name) + ".*undefined at the start point"):
        undefined_start_kernels()[name].init(START)


def test_parallel_tempering_names_the_level_that_refuses():
    # The target is defined everywhere, the hot level (an approximation) is not.
    ladder = approximation_ladder(normal(), [half_space()])
    kernel = ParallelTempering(ladder, lambda density, m: RandomWalkMetropolis(density, 0.5))
    with pytest.raises(UndefinedStartError, match="ParallelTempering level 1: RandomWalkMetropolis"):
        kernel.init(START)


def test_the_message_shortens_a_long_point_and_names_non_finite_coordinates():
    start = np.full(200, 2.0)
    density = FunctionDensity(200, lambda x: np.nan)
    with pytest.raises(UndefinedStartError, match=r"\.\.\.") as error:
        RandomWalkMetropolis(density).init(start)
    assert len(str(error.value)) < 400
    assert "dimension 200" in str(error.value)
    with pytest.raises(UndefinedStartError, match="non-finite coordinates"):
        RandomWalkMetropolis(normal()).init([np.nan, 0.0, 0.0])


@pytest.mark.parametrize("threads", [True, False])
def test_run_chains_names_the_chain_whose_start_is_undefined(threads):
    starts = np.array([np.zeros(DIM), START, np.zeros(DIM)])
    kernel = (lambda chain: HMC(half_space(), 0.1, 3)) if threads else HMC(half_space(), 0.1, 3)
    with pytest.raises(UndefinedStartError, match="chain 1: HMC: the log density is undefined"):
        run_chains(kernel, starts, 20, seed=0)


# -- a state without a gradient later in a run ---------------------------------------------------


def test_hmc_step_without_a_gradient_is_a_failed_proposal_not_a_crash():
    # A state from another kernel (a swap, a cycle) where the value is defined but the gradient is not.
    kernel = HMC(nan_gradient_beyond_one(), step_size=0.1, n_steps=5)
    state = State(START.copy(), -0.5 * START @ START)
    new, info = kernel.step(state, np.random.default_rng(0))
    assert info.failed and not info.accepted
    np.testing.assert_array_equal(new.position, START)


def test_tempered_transitions_with_hmc_reject_a_level_undefined_at_the_point():
    # The target is defined at the start, the approximation above it is not: the up-move's
    # HMC step there fails, so the proposal is rejected (it used to raise a TypeError).
    start = np.array([2.0, 0.0, 0.0])
    ladder = approximation_ladder(normal(), [half_space()])
    kernel = TemperedTransitions(ladder, lambda density, m: HMC(density, step_size=0.2, n_steps=3))
    state, info = kernel.step(kernel.init(start), np.random.default_rng(1))
    assert info.failed and not info.accepted
    np.testing.assert_array_equal(state.position, start)


def test_discretizing_chain_rejects_a_point_where_the_approximation_is_undefined():
    # Another kernel (in a cycle) moved the chain to where pi is defined and pi* is not: the
    # mapping rejects every mark move and keeps the point, rather than stopping the run.
    start = np.array([2.0, 0.0, 0.0])
    kernel = DiscretizingChain(normal(), RandomWalkMetropolis(half_space(), scale=0.5), moves=3)
    state, info = kernel.step(State(start, -2.0), np.random.default_rng(2))
    assert not info.accepted
    np.testing.assert_array_equal(state.position, start)


# -- proposals that keep failing -----------------------------------------------------------------


@pytest.mark.parametrize(
    "make_kernel",
    [
        lambda density: RandomWalkMetropolis(density, scale=0.5),
        lambda density: HMC(density, step_size=0.1, n_steps=3),
    ],
    ids=["metropolis", "hmc"],
)
@pytest.mark.parametrize("undefined", ["nan", "raise"])
def test_a_chain_whose_proposals_all_fail_warns_once(make_kernel, undefined):
    start = np.array([0.5, -0.5])
    kernel = make_kernel(defined_only_at(start, undefined))
    with pytest.warns(FailingDensityWarning) as caught:
        run = run_chains(kernel, start[None], 2 * FAILURES_BEFORE_WARNING + 10, seed=0)
    messages = [str(w.message) for w in caught if w.category is FailingDensityWarning]
    assert len(messages) == 1, messages
    assert re.match(rf"chain 0: {FAILURES_BEFORE_WARNING} proposals in a row failed", messages[0])
    for cause in ("NaN or infinity in the data", "edge of the support", "step size"):
        assert cause in messages[0]
    assert run.failed_proposals.tolist() == [2 * FAILURES_BEFORE_WARNING + 10]
    assert np.all(run.positions == start)


def box() -> FunctionDensity:
    """A standard normal on the cube |x_i| <= 1, NaN beyond (as where arithmetic overflows)."""
    return FunctionDensity(DIM, lambda x: -0.5 * x @ x if np.max(np.abs(x)) <= 1 else np.nan, lambda x: -x)


@pytest.mark.parametrize(
    ("kernel", "named"),
    [
        (HMC(box(), step_size=1e3, n_steps=2), "step_size = 1e+03"),
        (RandomWalkMetropolis(box(), scale=50.0), "scale = 50"),
    ],
    ids=["hmc", "metropolis"],
)
def test_proposals_that_fail_after_a_move_name_the_step_size(kernel, named):
    # A step far too large (a 1-iteration warm-up leaves one) leaves the region where the density is
    # defined at every move: the warning names it first, not NaN in the data.
    with pytest.warns(FailingDensityWarning) as caught:
        run_chains(kernel, np.zeros((1, DIM)), FAILURES_BEFORE_WARNING + 10, seed=0)
    message = str(caught[0].message)
    assert f"the likeliest cause is a step size far too large for this posterior ({named})" in message
    setting = named.split(" = ")[0]
    assert f"Lower {setting} (try " in message


def test_each_failing_chain_warns_and_its_thinned_failures_count():
    start = np.array([0.5])
    draws, thin = FAILURES_BEFORE_WARNING // 2, 3  # 1.5 times the threshold in steps
    with pytest.warns(FailingDensityWarning) as caught:
        run = run_chains(
            lambda chain: RandomWalkMetropolis(defined_only_at(start)),
            np.tile(start, (2, 1)),
            draws,
            thin=thin,
        )
    chains = sorted(re.match(r"chain (\d+):", str(w.message)).group(1) for w in caught)
    assert chains == ["0", "1"]
    assert run.failed_proposals.tolist() == [draws * thin] * 2
    assert run.inference_groups()["attrs"]["failed_proposals"] == 2 * draws * thin


def test_no_warning_below_the_threshold_or_for_a_healthy_chain():
    start = np.array([0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FailingDensityWarning)
        stuck = run_chains(
            RandomWalkMetropolis(defined_only_at(start)), start[None], FAILURES_BEFORE_WARNING - 1
        )
        # Near the edge of the support some proposals fail, but never a hundred in a row.
        edge = run_chains(RandomWalkMetropolis(half_space(), scale=1.0), np.zeros((2, DIM)), 1000, seed=3)
    assert stuck.failed_proposals.tolist() == [FAILURES_BEFORE_WARNING - 1]
    assert np.all(edge.failed_proposals > 0)
    assert np.all(edge.failed_proposals == edge.failed.sum(axis=1))
