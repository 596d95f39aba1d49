"""Geweke-style invariance tests: one step from exact draws must keep the target.

For each kernel, draw many points exactly from the mvn_mean posterior (and,
for tempering kernels, every level from its own exact tempered or subsampled
posterior), apply one step to each, and compare each coordinate of the
results with the exact marginal (Kolmogorov-Smirnov, Bonferroni over
coordinates). Deliberately broken kernels must fail the same test: a test
that cannot fail proves nothing (after Pigeons.jl's invariance tests).
"""

import numpy as np
import pytest
from scipy.stats import kstest

from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.kernels import (
    HMC,
    PCN,
    Cycle,
    DiscretizingChain,
    FunctionDensity,
    HessianPCN,
    Mixture,
    ParallelTempering,
    RandomWalkMetropolis,
    State,
    TemperedTransitions,
    approximation_ladder,
    power_ladder,
    subsampled_ladder,
)
from stanaccel.kernels.independence import IndependenceMetropolis
from stanaccel.kernels.mala import MALA
from stanaccel.kernels.metropolis import accept
from stanaccel.kernels.pcn import PosteriorPCN
from stanaccel.kernels.state import Info
from tests.kernels.models import exact_level_draws, mvn_density, mvn_problem

DATA, MEAN, SD = mvn_problem(N=30, D=2, seed=5)
BETAS = [1.0, 0.3, 0.1]
N_DRAWS = 3000
ALPHA = 1e-3


def inner(density, level, ladder):
    scale = 0.7 / np.sqrt(len(DATA["x"]) * ladder.betas[level] + 1)
    return (
        HMC(density, step_size=scale, n_steps=4) if level % 2 else RandomWalkMetropolis(density, scale=scale)
    )


def power():
    return power_ladder(mvn_density(DATA), mvn_density(DATA, beta=0.0), betas=BETAS)


def subsampled():
    return subsampled_ladder(lambda idx: mvn_density(DATA, indices=idx), len(DATA["x"]), betas=BETAS, seed=2)


class TTWithoutFirstFactor(TemperedTransitions):
    """Broken on purpose: the up-ratio h_1(x^_0) / h_0(x^_0) is left out."""

    def log_acceptance(self, state, rng):
        log_ratio, proposal = super().log_acceptance(state, rng)
        first = self.ladder.log_density(1, state.position) - state.log_density
        return log_ratio - first, proposal


class PTWithFlippedSwapRatio(ParallelTempering):
    """Broken on purpose: the swap ratio's sign is flipped."""

    def swap_accepted(self, log_ratio, rng):
        return super().swap_accepted(-log_ratio, rng)


class DriftingMetropolis(RandomWalkMetropolis):
    """Broken on purpose: an asymmetric proposal with no Hastings correction."""

    def step(self, state, rng):
        proposal = state.position + SD + self.scale * rng.standard_normal(state.position.shape[0])
        lp = self.density.log_density(proposal)
        accepted, probability = accept(lp - state.log_density, rng)
        return (
            (State(proposal, lp), Info(True, probability)) if accepted else (state, Info(False, probability))
        )


class MALAWithoutHastings(MALA):
    """Broken on purpose: the Langevin proposal accepted by pi(x') / pi(x), as if it were symmetric."""

    def log_hastings(self, state, proposal):
        return 0.0


class IndependenceWithRandomWalkRatio(IndependenceMetropolis):
    """Broken on purpose: accepted by pi(y) / pi(x), forgetting the proposal density q."""

    def log_proposal(self, x):
        return 0.0


def independence(kind=IndependenceMetropolis):
    """IMH with a t proposal fitted badly on purpose: off the mean, narrower than the posterior."""
    return kind(mvn_density(DATA), MEAN + SD, np.diag(SD**2), scale=0.5, batch=8)


class DiscretizingChainIgnoringApproximation(DiscretizingChain):
    """Broken on purpose: mark moves accepted by the ratio of pi alone."""

    @staticmethod
    def log_weight(log_pi, approx_state):
        return log_pi


class HessianPCNWithoutReference(HessianPCN):
    """Broken on purpose: accepted by pi(x') / pi(x), as if the proposal were symmetric."""

    def log_reference(self, x):
        return 0.0


class MixtureChoosingByState(Mixture):
    """Broken on purpose: the small-step Metropolis above the posterior mean, else HMC (each exact)."""

    def choose(self, state, rng):
        return 0 if state.position[0] > MEAN[0] else 2


def scales_mixture(kind=Mixture):
    """Metropolis with a small and a larger step, and HMC, on the posterior."""
    posterior = mvn_density(DATA)
    small, large = RandomWalkMetropolis(posterior, scale=0.01), RandomWalkMetropolis(posterior, scale=0.2)
    return kind([small, large, HMC(posterior, step_size=0.15, n_steps=6)], [0.3, 0.5, 0.2])


def hessian_pcn(kernel=HessianPCN, density=None):
    """h-pCN with a deliberately imperfect Laplace reference: off the mean, half the Hessian.

    The kernel needs no whitened prior to be exact (only to be efficient), so
    the Hessian here is the posterior precision less the identity.
    """
    _, covariance = exact_posterior(DATA)
    values, vectors = np.linalg.eigh(np.linalg.inv(covariance) - np.eye(len(MEAN)))
    return kernel(density or mvn_density(DATA), MEAN + SD, values / 2, vectors, rho=0.3)


def approximation(beta: float = 0.4):
    """A poor pi*: the posterior with its likelihood tempered (wider, shifted toward the prior)."""
    return mvn_density(DATA, beta=beta)


def pcn_on(density):
    """pCN on ``density`` about a Gaussian near the posterior (wider, off its mean), its state log density."""
    return PosteriorPCN(density, MEAN + SD / 2, np.diag((1.5 * SD) ** 2), rho=0.5)


def likelihood_pcn_on(density):
    """The same proposals and decisions as :func:`pcn_on`, its state the log ratio to the reference
    (:class:`PCN` on density / reference): what ``dc`` and ``tt-approx`` with ``inner = "pcn"`` were given
    before, so that they read log pi* - log N as log pi* and sampled pi x N."""
    reference = pcn_on(density)
    ratio = FunctionDensity(density.dim, lambda x: density.log_density(x) - reference.log_reference(x))
    return PCN(ratio, reference.mean, np.diag((1.5 * SD) ** 2), rho=0.5)


def mh_on(density):
    return RandomWalkMetropolis(density, scale=1.5 * SD.max())


def one_step_p_values(kernel, ladder=None) -> np.ndarray:
    """KS p-value per coordinate of one kernel step applied to exact draws."""
    rng = np.random.default_rng(2026)
    starts = exact_level_draws(DATA, 1.0, N_DRAWS, rng)
    if ladder is not None and isinstance(kernel, ParallelTempering):
        subsets = getattr(ladder, "subsets", [None] * len(ladder))
        beta_of = [1.0] * len(ladder) if ladder.kind == "subsampled" else ladder.betas
        hot = [exact_level_draws(DATA, beta_of[m], N_DRAWS, rng, subsets[m]) for m in range(len(ladder))]
    out = np.empty_like(starts)
    for k, x in enumerate(starts):
        state = kernel.init(x)
        if ladder is not None and isinstance(kernel, ParallelTempering):
            replicas = [State(hot[m][k], ladder.log_density(m, hot[m][k])) for m in range(len(ladder))]
            replicas[0] = kernel.kernels[0].init(x)
            state.extra["replicas"] = replicas
            state.extra["iteration"] = k  # alternate even and odd swap pairs across draws
        state, _ = kernel.step(state, rng)
        out[k] = state.position
    return np.array([kstest(out[:, i], "norm", args=(MEAN[i], SD[i])).pvalue for i in range(len(MEAN))])


def correct_kernels():
    posterior = mvn_density(DATA)
    likelihood = mvn_density({**DATA, "Sigma0": np.eye(2) * 1e12})
    pl, sl, tl, stl = power(), subsampled(), power(), subsampled()
    return {
        "MH": (RandomWalkMetropolis(posterior, scale=0.3), None),
        "HMC": (HMC(posterior, step_size=0.15, n_steps=6, step_size_jitter=0.3), None),
        "MALA": (MALA(posterior, step_size=1.0, inv_metric=SD**2), None),
        "pCN": (PCN(likelihood, DATA["mu0"], DATA["Sigma0"], rho=0.9), None),
        "pCN about a fitted Gaussian": (pcn_on(posterior), None),
        "IMH": (independence(), None),
        "h-pCN": (hessian_pcn(), None),
        "PT": (ParallelTempering(pl, lambda d, m: inner(d, m, pl)), pl),
        "SPT": (ParallelTempering(sl, lambda d, m: inner(d, m, sl)), sl),
        "TT": (TemperedTransitions(tl, lambda d, m: inner(d, m, tl)), tl),
        "STT": (TemperedTransitions(stl, lambda d, m: inner(d, m, stl)), stl),
        "DC (MH)": (DiscretizingChain(posterior, mh_on(approximation()), moves=3, jump=4), None),
        "DC (HMC)": (
            DiscretizingChain(posterior, HMC(approximation(), step_size=0.3, n_steps=3), moves=2, jump=3),
            None,
        ),
        "DC (h-pCN)": (
            DiscretizingChain(posterior, hessian_pcn(density=approximation()), moves=2, jump=3),
            None,
        ),
        "DC (pCN)": (DiscretizingChain(posterior, pcn_on(approximation()), moves=2, jump=3), None),
        "mixture of MH scales and HMC": (scales_mixture(), None),
        "TT over approximations": (
            TemperedTransitions(
                approximation_ladder(posterior, [approximation(0.6), approximation(0.3)]),
                lambda d, m: Cycle([mh_on(d)] * 3),
            ),
            None,
        ),
        "TT over approximations (pCN)": (
            TemperedTransitions(
                approximation_ladder(posterior, [approximation(0.6)]), lambda d, m: pcn_on(d)
            ),
            None,
        ),
    }


@pytest.mark.parametrize("name", list(correct_kernels()))
@pytest.mark.slow
def test_correct_kernel_keeps_the_target(name):
    kernel, ladder = correct_kernels()[name]
    p_values = one_step_p_values(kernel, ladder)
    assert np.all(p_values > ALPHA / len(p_values)), (name, p_values)


def broken_kernels():
    tl, pl = power(), power()
    return {
        "TT without a factor": (TTWithoutFirstFactor(tl, lambda d, m: inner(d, m, tl)), tl),
        "PT with a flipped swap ratio": (PTWithFlippedSwapRatio(pl, lambda d, m: inner(d, m, pl)), pl),
        "drifting Metropolis": (DriftingMetropolis(mvn_density(DATA), scale=0.3), None),
        "MALA without its Hastings correction": (MALAWithoutHastings(mvn_density(DATA), 1.0, SD**2), None),
        "h-pCN without its reference": (hessian_pcn(HessianPCNWithoutReference), None),
        "IMH with a random-walk ratio": (independence(IndependenceWithRandomWalkRatio), None),
        "mixture choosing by the state": (scales_mixture(MixtureChoosingByState), None),
        "DC ignoring pi*": (
            DiscretizingChainIgnoringApproximation(
                mvn_density(DATA), mh_on(approximation()), moves=3, jump=4
            ),
            None,
        ),
        "DC with pCN's likelihood as its state": (
            DiscretizingChain(mvn_density(DATA), likelihood_pcn_on(approximation()), moves=2, jump=3),
            None,
        ),
        "TT over approximations with pCN's likelihood as its state": (
            TemperedTransitions(
                approximation_ladder(mvn_density(DATA), [approximation(0.6)]),
                lambda d, m: likelihood_pcn_on(d),
            ),
            None,
        ),
    }


@pytest.mark.parametrize("name", list(broken_kernels()))
def test_broken_kernel_is_caught(name):
    kernel, ladder = broken_kernels()[name]
    p_values = one_step_p_values(kernel, ladder)
    assert np.any(p_values < ALPHA / len(p_values)), (name, p_values)
