"""The adaptive tempering schedule and the stepping-stone evidence, on targets whose barrier and
evidence are known in closed form (NumPy densities: no Stan compile)."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from stanaccel.diagnostics.metrics import EVIDENCE_MEANING, combined_statistics, method_statistics
from stanaccel.kernels import FunctionDensity, ParallelTempering, RandomWalkMetropolis, run_chains
from stanaccel.kernels.evidence import evidence_report, prior_problem, spread_growth
from stanaccel.kernels.ladder import nested_subsets, power_ladder, subset_betas
from stanaccel.kernels.parallel_tempering import PRIOR_DRAWS
from stanaccel.kernels.schedule import (
    adapt_schedule,
    equalised_betas,
    levels_for_barrier,
    limit_rate,
    round_trip_rate,
    trajectory_span,
)
from stanaccel.kernels.state import Info, State

DIM, CURVATURE = 3, np.expm1(5.0)  # prior N(0, I), likelihood exp(-c |x|^2 / 2), log(1 + c) = 5


def gaussian_family():
    """(posterior, prior): h_beta = N(x | 0, I / (1 + beta c)) up to its normaliser."""

    def prior(x):
        return float(-0.5 * x @ x - 0.5 * DIM * np.log(2 * np.pi))

    def posterior(x):
        return prior(x) - 0.5 * CURVATURE * float(x @ x)

    return FunctionDensity(DIM, posterior), FunctionDensity(DIM, prior)


def gaussian_barrier() -> float:
    """Lambda = int_0^1 (1/2) E|V - V'| d beta, V = c |x|^2 / 2 with x ~ N(0, I / (1 + beta c)):
    (1/4) E|chi2_d - chi2_d'| log(1 + c), and E|A - A'| = 2 int F (1 - F) for iid A, A'."""
    spread = 2 * integrate.quad(lambda t: stats.chi2.cdf(t, DIM) * stats.chi2.sf(t, DIM), 0, np.inf)[0]
    return 0.25 * spread * np.log1p(CURVATURE)


class ExactDraw:
    """A level's exact Gaussian draw as its inner kernel: the local exploration the theory assumes."""

    exact = True

    def __init__(self, density, beta: float):
        self.density, self.sd = density, 1 / np.sqrt(1 + beta * CURVATURE)

    def init(self, position):
        return State(np.asarray(position, dtype=float), self.density.log_density(position))

    def step(self, state, rng):
        x = self.sd * rng.standard_normal(DIM)
        return State(x, self.density.log_density(x)), Info(True, 1.0)


def exact_pt(betas, factors=None):
    ladder = power_ladder(*gaussian_family(), betas)
    return ParallelTempering(ladder, lambda density, m: ExactDraw(density, ladder.betas[m]))


def test_levels_for_barrier_reach_the_share_of_the_limit():
    for barrier in (0.5, 2.0, 6.0, 12.0):
        n = levels_for_barrier(barrier)
        equal = np.full(n - 1, barrier / (n - 1))
        assert round_trip_rate(equal) >= 0.8 * limit_rate(barrier)
        if n > 3:  # one level fewer misses it
            assert round_trip_rate(np.full(n - 2, barrier / (n - 2))) < 0.8 * limit_rate(barrier)


def test_equal_rejections_keep_the_betas_and_unequal_ones_move_them():
    betas = np.linspace(1, 0, 6)
    np.testing.assert_allclose(equalised_betas(betas, np.full(5, 0.3), 6), betas, atol=1e-12)
    moved = equalised_betas(betas, [0.9, 0.1, 0.1, 0.1, 0.1], 6)  # the barrier sits near beta = 1
    assert moved[0] == 1 and moved[-1] == 0 and np.all(np.diff(moved) < 0)
    assert moved[1] > betas[1]  # levels crowd where the rejections were


def test_a_subsampled_ladder_keeps_to_whole_distinct_subsets():
    assert subset_betas([1, 0.97, 0.95, 0.5, 0.51 / 16, 0.01], 16).tolist() == [1, 15 / 16, 0.5, 1 / 16]
    crowded = equalised_betas(np.linspace(1, 0.125, 7), [0.9, 0.1, 0.1, 0.1, 0.1, 0.1], 40, n_obs=16)
    sizes = crowded * 16
    np.testing.assert_allclose(sizes, np.round(sizes))  # asked for 40 levels, got the sizes there are
    assert len(crowded) <= 15 and crowded[0] == 1 and crowded[-1] == 0.125 and np.all(np.diff(sizes) < 0)
    subsets = nested_subsets(16, crowded, np.random.default_rng(0))
    assert [len(s) for s in subsets] == sizes.astype(int).tolist()  # no two levels share a subset


def test_a_ladder_too_long_for_the_most_levels_is_shortened_to_what_they_can_cross():
    assert trajectory_span(10, 0.3, 64) == 1  # enough levels: the whole barrier
    # the pilot already had the most levels: the barrier crossed goes as |Phi^-1(a / 2)|
    assert trajectory_span(17, 0.01, 17) == pytest.approx(stats.norm.ppf(0.15) / stats.norm.ppf(0.005))
    assert trajectory_span(17, 0.01, 65) == pytest.approx(2 * trajectory_span(17, 0.01, 17))  # sqrt(64 / 16)
    linear = (np.linspace(1, 0, 11), np.full(10, 0.2))  # the barrier rises evenly with beta
    np.testing.assert_allclose(equalised_betas(*linear, 5, span=0.4), [1, 0.9, 0.8, 0.7, 0.6])


@pytest.mark.slow
def test_adapted_schedule_on_a_gaussian_family_has_the_known_barrier_and_round_trip_rate():
    truth = gaussian_barrier()
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(5).spawn(2)]
    schedule = adapt_schedule(exact_pt, np.zeros((2, DIM)), rngs, np.linspace(1, 0, 6), rounds=9)
    assert abs(schedule.barrier - truth) < 0.1 * truth
    assert abs(len(schedule.betas) - levels_for_barrier(truth)) <= 1
    last = np.asarray(schedule.rounds[-1].rejection)
    assert np.ptp(last) < 0.15  # equalised: every pair rejects about Lambda / (levels - 1)
    run = run_chains(exact_pt(schedule.betas), np.zeros((2, DIM)), 3000, seed=7)
    measured = np.mean([s["round_trip_rate"] for s in run.summaries])
    assert abs(measured - limit_rate(truth)) < 0.25 * limit_rate(truth)


def test_a_user_given_number_of_levels_is_kept():
    rngs = [np.random.default_rng(1)]
    schedule = adapt_schedule(exact_pt, np.zeros((1, DIM)), rngs, np.linspace(1, 0, 6), rounds=5, n_levels=9)
    assert len(schedule.betas) == 9
    assert [len(r.betas) for r in schedule.rounds] == [6, 9, 9, 9, 9]


def test_each_levels_inner_step_is_adapted_to_the_target_acceptance():
    """Random-walk scales 30 times too small at every level: the factors grow them until each level
    accepts about the target, and they stay 1 without a target."""

    def pt(betas, factors):
        ladder = power_ladder(*gaussian_family(), betas)
        return ParallelTempering(
            ladder,
            lambda density, m: RandomWalkMetropolis(
                density, scale=factors[m] / 30 / np.sqrt(1 + ladder.betas[m] * CURVATURE)
            ),
        )

    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(2).spawn(2)]
    schedule = adapt_schedule(pt, np.zeros((2, DIM)), rngs, np.linspace(1, 0, 5), rounds=8, inner_target=0.3)
    last = schedule.rounds[-1]
    assert np.all(np.abs(np.asarray(last.inner_acceptance) - 0.3) < 0.12), last.inner_acceptance
    assert len(schedule.step_factors) == len(schedule.betas) and np.all(schedule.step_factors > 10)
    assert schedule.report()["step_factors"] == schedule.step_factors.tolist()
    fixed = adapt_schedule(pt, np.zeros((2, DIM)), rngs, np.linspace(1, 0, 5), rounds=3)
    assert fixed.step_factors is None and fixed.rounds[-1].inner_acceptance is None


def evidence(run) -> tuple[float, float]:
    rows = dict(combined_statistics(method_statistics(run.summaries)))
    evidence = next(k for k in rows if k.startswith(EVIDENCE_MEANING))  # what the number is, said with it
    return rows[evidence], rows["log Z(beta=1) - log Z(beta=0): its Monte Carlo standard error"]


def test_stepping_stone_evidence_of_the_gaussian_family():
    exact = -0.5 * DIM * np.log1p(CURVATURE)  # int N(x | 0, I) exp(-c |x|^2 / 2) dx
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(8).spawn(2)]
    schedule = adapt_schedule(exact_pt, np.zeros((2, DIM)), rngs, np.linspace(1, 0, 6), rounds=6)
    run = run_chains(exact_pt(schedule.betas), np.zeros((4, DIM)), 1000, seed=9)
    log_z, mcse = evidence(run)
    assert abs(log_z - exact) < 3 * mcse and mcse < 0.1


# Poisson-gamma on the log scale: y_i ~ Poisson(lambda), lambda ~ Gamma(A, B), sampled in
# u = log lambda with the Jacobian, as Stan would (random-walk Metropolis at each level).
A, B = 2.0, 0.5
COUNTS = np.array([3, 7, 4, 6, 5, 2, 8, 5])


def poisson_gamma():
    # the closed-form log densities, not scipy.stats' (150 us a call): the test's time is in these calls
    gamma_norm, factorials = A * np.log(B) - special.gammaln(A), np.sum(special.gammaln(COUNTS + 1))

    def prior(u):  # Gamma(A, B) log pdf at lambda = e^u, plus the Jacobian u
        return float(gamma_norm + A * u[0] - B * np.exp(u[0]))

    def posterior(u):
        return prior(u) + float(COUNTS.sum() * u[0] - len(COUNTS) * np.exp(u[0]) - factorials)

    return FunctionDensity(1, posterior), FunctionDensity(1, prior)


def poisson_gamma_evidence() -> float:
    n, total = len(COUNTS), COUNTS.sum()
    return float(A * np.log(B) - special.gammaln(A) + special.gammaln(A + total)
                 - (A + total) * np.log(B + n) - np.sum(special.gammaln(COUNTS + 1)))  # fmt: skip


@pytest.mark.slow
def test_stepping_stone_evidence_of_a_poisson_gamma_model():
    def pt(betas, factors=None):
        ladder = power_ladder(*poisson_gamma(), betas)
        return ParallelTempering(
            ladder,
            lambda density, m: RandomWalkMetropolis(density, scale=0.15 / np.sqrt(ladder.betas[m] + 0.02)),
        )

    starts = np.full((4, 1), np.log(5.0))
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence(3).spawn(4)]
    schedule = adapt_schedule(pt, starts, rngs, np.linspace(1, 0, 6), rounds=6)
    run = run_chains(pt(schedule.betas), schedule.positions, 3000, seed=4)
    log_z, mcse = evidence(run)
    assert abs(log_z - poisson_gamma_evidence()) < 3 * mcse and mcse < 0.1


def test_a_ladder_that_stops_above_zero_reports_no_evidence():
    run = run_chains(exact_pt(np.geomspace(1, 1 / 8, 5)), np.zeros((1, DIM)), 50, seed=1)
    assert "log_evidence" not in run.summaries[0]


@pytest.mark.slow
def test_an_improper_prior_gives_no_evidence_and_a_proper_one_does():
    # x[1] is in no term: at beta = 0 (and at every level) it drifts without bound, so there is no evidence
    def pt(flat: bool):
        def prior(x):
            return float(stats.norm.logpdf(x[0]) + (0.0 if flat else stats.norm.logpdf(x[1])))

        def posterior(x):
            return prior(x) + float(stats.norm.logpdf(1.0, x[0], 0.5))

        ladder = power_ladder(FunctionDensity(2, posterior), FunctionDensity(2, prior), [1.0, 0.3, 0.1, 0.0])
        return ParallelTempering(ladder, lambda density, m: RandomWalkMetropolis(density, scale=1.0))

    improper = run_chains(pt(flat=True), np.zeros((4, 2)), 600, seed=7)  # R-hat 1.09, spread 1.95
    kept = improper.summaries[0]["prior_draws"]
    assert PRIOR_DRAWS <= len(kept) < 2 * PRIOR_DRAWS  # evenly spaced over the 600 scans
    report = evidence_report(improper.summaries)
    assert report["log_evidence"] is None and "did not settle" in report["not_given"]
    assert report["description"] == EVIDENCE_MEANING
    assert not any({"log_evidence", "prior_draws"} & set(s) for s in improper.summaries)  # no number shown
    proper = evidence_report(run_chains(pt(flat=False), np.zeros((4, 2)), 600, seed=2).summaries)
    assert (
        "not_given" not in proper and np.isfinite(proper["log_evidence"]) and proper["log_evidence_mcse"] > 0
    )


def test_a_proper_levels_spread_that_grew_by_chance_is_no_sign_of_an_improper_one():
    # Stationary AR(1) chains at N(0, 1), 4 x 300 draws as a short run keeps them: x[1] is 1.31 times as
    # wide in the last quarter as in the second, by chance (2.4 standard errors of that ratio)
    rng, rho = np.random.default_rng(54), 0.8
    draws = np.empty((4, 300, 3))
    draws[:, 0] = rng.standard_normal((4, 3))
    for t in range(1, 300):
        draws[:, t] = rho * draws[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal((4, 3))
    growth, errors = spread_growth(draws)
    assert 1.3 < growth[1] < 1.31 and 2 < errors[1] < 3
    assert prior_problem(draws) is None
    walks = np.cumsum(np.random.default_rng(1).standard_normal((4, 300, 1)), axis=1)  # an improper level
    assert "did not settle" in prior_problem(walks)


@pytest.mark.parametrize("bad", [[1, 0.5], [0.9, 0.5, 0]])
def test_equalised_betas_check_their_input(bad):
    with pytest.raises(ValueError):
        equalised_betas(bad, [0.1, 0.1], 3)
