"""AE-HMC and AE-pCN on NumPy Gaussians with hand-made networks (no training, no Stan).

The exact modes must keep the target for any encoder and decoder, so these
tests use random tanh networks, far from an identity map: one step from
exact draws keeps every marginal (Kolmogorov-Smirnov, Bonferroni), and the
published approximate mode, and an exact mode with its auxiliary term
removed, are caught by the same test.
"""

import numpy as np
import pytest
from scipy.stats import kstest

from stanaccel.diagnostics import to_inference_data
from stanaccel.kernels import Cycle, FunctionDensity, RandomWalkMetropolis, run_chains
from stanaccel.latent import DenseLayer, DenseNetwork, LatentMaps
from stanaccel.latent.samplers import APPROXIMATE_NOTE, AutoencoderHMC, AutoencoderPCN
from tests.kernels.test_kernels import assert_moments_within_mcse

D, LATENT, HIDDEN = 4, 2, 6
RNG = np.random.default_rng(20)
_A = RNG.standard_normal((D, D))
COV = _A @ _A.T / D + np.diag(np.linspace(0.2, 1.0, D))
MEAN = np.linspace(-1.0, 2.0, D)
SD = np.sqrt(np.diag(COV))
PRECISION = np.linalg.inv(COV)
N_DRAWS = 3000
ALPHA = 1e-3


def gaussian() -> FunctionDensity:
    return FunctionDensity(
        D, lambda x: -0.5 * (x - MEAN) @ PRECISION @ (x - MEAN), lambda x: -PRECISION @ (x - MEAN)
    )


def random_maps(seed: int = 3) -> LatentMaps:
    """An untrained tanh autoencoder: encode and decode are far from inverse to each other."""
    rng = np.random.default_rng(seed)
    encoder = DenseNetwork(
        [DenseLayer(0.6 * rng.standard_normal((HIDDEN, D)), 0.1 * rng.standard_normal(HIDDEN), "tanh"),
         DenseLayer(rng.standard_normal((LATENT, HIDDEN)), np.zeros(LATENT))]
    )  # fmt: skip
    decoder = DenseNetwork(
        [DenseLayer(0.6 * rng.standard_normal((HIDDEN, LATENT)), np.zeros(HIDDEN), "tanh"),
         DenseLayer(rng.standard_normal((D, HIDDEN)), 0.1 * rng.standard_normal(D))]
    )  # fmt: skip
    return LatentMaps(encoder, decoder, MEAN, SD)


class HMCWithoutAuxiliary(AutoencoderHMC):
    """Broken on purpose: the auxiliary latent variable's density is left out of the potential."""

    def _auxiliary(self, z, q):
        return 0.0, np.zeros_like(z), np.zeros_like(q)


def one_step_p_values(kernel, steps: int = 2) -> np.ndarray:
    rng = np.random.default_rng(11)
    out = np.empty((N_DRAWS, D))
    for n, x in enumerate(rng.multivariate_normal(MEAN, COV, size=N_DRAWS)):
        state = kernel.init(x)
        for _ in range(steps):
            state, _ = kernel.step(state, rng)
        out[n] = state.position
    return np.array([kstest(out[:, i], "norm", args=(MEAN[i], SD[i])).pvalue for i in range(D)])


def kernels(exact: bool, broken: bool = False, rho: float = 0.6):
    maps = random_maps()
    hmc = HMCWithoutAuxiliary if broken else AutoencoderHMC
    return {
        "ae-hmc": hmc(gaussian(), maps, step_size=0.15, n_steps=5, exact=exact),
        "ae-pcn": AutoencoderPCN(gaussian(), maps, exact=exact, rho=rho, prior=(MEAN, 4 * COV)),
    }


@pytest.mark.parametrize("name", ["ae-hmc", "ae-pcn"])
@pytest.mark.slow
def test_exact_mode_keeps_the_target(name):
    kernel = kernels(exact=True)[name]
    p_values = one_step_p_values(kernel)
    assert np.all(p_values > ALPHA / D), (name, p_values)
    assert kernel.exact


@pytest.mark.parametrize("name", ["ae-hmc", "ae-pcn"])
@pytest.mark.slow
def test_published_approximate_mode_is_caught(name):
    kernel = kernels(exact=False, rho=0.9)[name]
    assert not kernel.exact and "approximate" in kernel.note
    p_values = one_step_p_values(kernel, steps=5 if name == "ae-hmc" else 20)
    assert np.any(p_values < ALPHA / D), (name, p_values)


def test_the_output_says_which_mode_ran():
    for exact in (True, False):
        run = run_chains(kernels(exact=exact)["ae-hmc"], MEAN[None], 5, seed=0)
        attrs = to_inference_data(run).posterior.attrs
        assert attrs["exact"] == exact
        assert attrs["invariance"].startswith("exact" if exact else "approximate")
        assert run.summaries[0]["mode"] == ("exact" if exact else APPROXIMATE_NOTE)


def test_exact_hmc_without_its_auxiliary_term_is_caught():
    p_values = one_step_p_values(kernels(exact=True, broken=True)["ae-hmc"])
    assert np.any(p_values < ALPHA / D), p_values


@pytest.mark.parametrize("name", ["ae-hmc", "ae-pcn"])
@pytest.mark.slow
def test_exact_mode_with_a_full_space_move_recovers_the_moments(name):
    latent = kernels(exact=True)[name]
    kernel = Cycle([latent, RandomWalkMetropolis(latent.density, scale=0.8, covariance=COV)])
    starts = np.random.default_rng(1).multivariate_normal(MEAN, COV, size=4)
    run = run_chains(kernel, starts, 3000, seed=4)
    assert_moments_within_mcse(run.positions, MEAN, SD)


def test_the_network_vjp_and_jacobian_agree_with_finite_differences():
    maps = random_maps()
    rng = np.random.default_rng(0)
    z, v = rng.standard_normal(LATENT), rng.standard_normal(D)
    J = maps.decode_jacobian(z)
    h = 1e-6
    numeric = np.column_stack(
        [(maps.decode(z + h * e) - maps.decode(z - h * e)) / (2 * h) for e in np.eye(LATENT)]
    )
    np.testing.assert_allclose(J, numeric, atol=1e-7)
    np.testing.assert_allclose(maps.decode_vjp(z, v)[1], J.T @ v, atol=1e-12)
    q, w = MEAN + rng.standard_normal(D), rng.standard_normal(LATENT)
    np.testing.assert_allclose(maps.encode_vjp(q, w)[1], maps.encode_jacobian(q).T @ w, atol=1e-12)


def test_a_failed_density_evaluation_is_a_rejection():
    def log_density(x):
        if x[0] > MEAN[0] + SD[0]:
            raise FloatingPointError("outside the domain")
        return -0.5 * (x - MEAN) @ PRECISION @ (x - MEAN)

    density = FunctionDensity(D, log_density, lambda x: -PRECISION @ (x - MEAN))
    kernel = AutoencoderHMC(density, random_maps(), step_size=0.3, n_steps=5, exact=True)
    rng = np.random.default_rng(2)
    state = kernel.init(MEAN)
    failed = 0
    for _ in range(200):
        state, info = kernel.step(state, rng)
        failed += info.failed
        assert state.position[0] <= MEAN[0] + SD[0]
    assert failed > 0


def test_bad_settings_are_refused():
    maps = random_maps()
    with pytest.raises(ValueError, match="coordinates"):
        AutoencoderHMC(FunctionDensity(D + 1, lambda x: 0.0), maps, 0.1, 3, exact=True)
    with pytest.raises(ValueError, match="step_size"):
        AutoencoderHMC(gaussian(), maps, 0.0, 3, exact=True)
    with pytest.raises(ValueError, match="prior"):
        AutoencoderPCN(gaussian(), maps, exact=False, rho=0.5)
    with pytest.raises(ValueError, match="one of rho and step"):
        AutoencoderPCN(gaussian(), maps, exact=True)
    with pytest.raises(ValueError, match="starting point"):
        AutoencoderHMC(gaussian(), maps, 0.1, 3, exact=True).init(np.zeros(D + 2))
