"""Hessian-informed pCN: exact on a Gaussian posterior wherever its reference sits, plain pCN at H = 0.

The known target is a linear-Gaussian inverse problem in whitened coordinates:
prior N(0, I) in 6 dimensions, two noisy linear observations y = A x + e, so
the Gauss-Newton Hessian A^T A / s^2 is the exact Hessian (rank 2) and the
posterior N(mu, (I + H)^-1) is known in closed form.
"""

import numpy as np
import pytest

from stanaccel.kernels import PCN, FunctionDensity, HessianPCN, run_chains
from stanaccel.pde import elliptic_posterior, find_map, gauss_newton_hessian
from tests.kernels.test_kernels import assert_moments_within_mcse

DIM, NOISE_SD = 6, 0.3


def linear_gaussian_problem(seed: int = 0):
    """(forward map A, data y, posterior mean, posterior covariance) of the linear-Gaussian target."""
    rng = np.random.default_rng(seed)
    forward = rng.standard_normal((2, DIM))
    data = forward @ rng.standard_normal(DIM) + NOISE_SD * rng.standard_normal(2)
    covariance = np.linalg.inv(np.eye(DIM) + forward.T @ forward / NOISE_SD**2)
    mean = covariance @ forward.T @ data / NOISE_SD**2
    return forward, data, mean, covariance


FORWARD, DATA, MEAN, COVARIANCE = linear_gaussian_problem()
SD = np.sqrt(np.diag(COVARIANCE))


def log_likelihood(x):
    return -0.5 * np.sum((FORWARD @ x - DATA) ** 2) / NOISE_SD**2


def posterior_density():
    return FunctionDensity(DIM, lambda x: log_likelihood(x) - 0.5 * x @ x)


def likelihood_density():
    return FunctionDensity(DIM, log_likelihood)


def exact_hessian():
    """The eigenpairs of H = A^T A / s^2, rank 2, descending."""
    values, vectors = np.linalg.eigh(FORWARD.T @ FORWARD / NOISE_SD**2)
    return values[::-1][:2], vectors[:, ::-1][:, :2]


def references():
    """(mean, eigenvalues, eigenvectors): the exact Laplace approximation and deliberately wrong ones."""
    values, vectors = exact_hessian()
    offset = SD * np.array([1, -1, 1, -1, 1, -1])  # 2.2 posterior sds away (Mahalanobis)
    return {
        "exact MAP and Hessian": (MEAN, values, vectors),
        "offset mean": (MEAN + offset, values, vectors),
        "wrong Hessian (rank 1, a fifth of it)": (MEAN, values[:1] / 5, vectors[:, :1]),
        "offset mean and wrong Hessian": (MEAN + offset / 2, values / 2, vectors),
    }


@pytest.mark.parametrize("name", list(references()))
def test_recovers_the_gaussian_posterior_wherever_the_reference_sits(name):
    mean, values, vectors = references()[name]
    kernel = HessianPCN(posterior_density(), mean, values, vectors, rho=0.5)
    assert kernel.exact
    starts = MEAN + 3 * SD * np.random.default_rng(0).standard_normal((4, DIM))
    run = run_chains(kernel, starts, 2000, seed=42)
    assert_moments_within_mcse(run.positions[:, 200:], MEAN, SD)
    if name.startswith("exact"):
        assert run.accepted.all()  # the reference is the posterior: every proposal is accepted
    else:
        assert 0.05 < run.accepted.mean() < 0.95, (name, run.accepted.mean())


def test_without_a_hessian_at_the_prior_mean_it_is_plain_pcn():
    """H = 0, m = 0: the same draws as PCN(likelihood, 0, I) from the same random numbers."""
    starts = np.zeros((2, DIM))
    plain = run_chains(PCN(likelihood_density(), np.zeros(DIM), np.eye(DIM), rho=0.7), starts, 300, seed=3)
    for values, vectors in [(np.zeros(0), np.zeros((DIM, 0))), (np.zeros(2), np.eye(DIM)[:, :2])]:
        kernel = HessianPCN(posterior_density(), np.zeros(DIM), values, vectors, rho=0.7)
        hessian_informed = run_chains(kernel, starts, 300, seed=3)
        np.testing.assert_array_equal(hessian_informed.accepted, plain.accepted)
        np.testing.assert_allclose(hessian_informed.positions, plain.positions, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            hessian_informed.acceptance_probability, plain.acceptance_probability, rtol=1e-9, atol=1e-12
        )
    assert 0 < plain.accepted.mean() < 1


def test_step_gives_rho_as_for_pcn():
    values, vectors = exact_hessian()
    kernel = HessianPCN(posterior_density(), MEAN, values, vectors, step=0.5)
    assert kernel.rho == PCN(likelihood_density(), np.zeros(DIM), np.eye(DIM), step=0.5).rho


@pytest.mark.parametrize(
    "change, message",
    [
        ({"mean": np.zeros(DIM + 1)}, "mean has length 7 but the density has dimension 6"),
        ({"mean": np.zeros((DIM, 1))}, "mean must be a vector"),
        ({"eigenvalues": np.ones(3)}, r"eigenvectors must be \(dim, r\) = \(6, 3\)"),
        ({"eigenvectors": np.eye(DIM)[:2]}, r"not shape \(2, 6\)"),
        ({"eigenvalues": np.array([1.0, -0.5])}, "non-negative.*smallest is -0.5"),
        ({"eigenvalues": np.array([1.0, np.nan])}, "finite"),
        ({"eigenvectors": 2 * np.eye(DIM)[:, :2]}, "orthonormal"),
        ({"rho": 1.0}, r"rho must be in \[0, 1\)"),
    ],
)
def test_mismatched_or_impossible_arguments_are_clear_errors(change, message):
    arguments = {"mean": MEAN, "eigenvalues": np.ones(2), "eigenvectors": np.eye(DIM)[:, :2], "rho": 0.5}
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        HessianPCN(posterior_density(), **arguments)


def test_undefined_density_is_a_rejection_and_an_undefined_start_an_error():
    from stanaccel.kernels import UndefinedStartError

    def log_density(x):
        if x[0] > MEAN[0]:
            raise FloatingPointError("outside the support")
        return log_likelihood(x) - 0.5 * x @ x

    values, vectors = exact_hessian()
    kernel = HessianPCN(FunctionDensity(DIM, log_density), MEAN, values, vectors, rho=0.3)
    run = run_chains(kernel, (MEAN - SD)[None], 200, seed=1)
    assert run.failed.any() and np.all(run.positions[..., 0] <= MEAN[0])
    with pytest.raises(UndefinedStartError, match="HessianPCN"):
        kernel.init(MEAN + SD)


@pytest.fixture(scope="module")
def pde():
    """(posterior, MAP, Gauss-Newton Hessian at the MAP) of the informative 20x20 benchmark."""
    posterior = elliptic_posterior(n=20, degree=1, regime="observations", seed=0)
    mode = find_map(posterior)
    return posterior, mode, gauss_newton_hessian(posterior, mode.xi)


def test_accepts_large_steps_on_the_20x20_pde_posterior(pde):
    posterior, mode, hessian = pde
    kernel = HessianPCN.at_map(posterior, mode, hessian, rho=0.5)
    assert kernel.mean.shape == (posterior.dim,) and kernel.eigenvectors.shape == (posterior.dim, 25)
    rng = np.random.default_rng(0)
    state = kernel.init(mode.xi)
    accepted = 0
    for _ in range(200):
        state, info = kernel.step(state, rng)
        accepted += info.accepted
    assert accepted > 20, accepted  # 34; plain pCN at this step accepts nothing here
    assert np.isfinite(state.log_density)
