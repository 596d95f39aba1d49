"""The correctness matrix (tests/sampling/matrix.py) for the methods that move on approximations
(``dc``, ``tt-approx``): every inner kernel x approximation kind x warm-up, and a broken control."""

import numpy as np
import pytest

from stanaccel.densities import FunctionDensity
from stanaccel.kernels import PCN
from stanaccel.kernels.pcn import PosteriorPCN
from stanaccel.sampling import build
from tests.sampling.matrix import Z_LIMIT, Case, cases, check_case, matrix_files, run_case, worst_z  # noqa: F401
from tests.sampling.programs import regression_data, regression_posterior

CASES = cases(latent=False, approximations=True)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_the_combination_is_exact_or_refused(matrix_files, case):  # noqa: F811
    check_case(case, matrix_files)


def likelihood_pcn_kernel(density, reference, step):
    """The inner pCN as it was before issue 37: its state held log pi* - log N, which dc and tt-approx
    read as log pi*, so that they sampled pi x N (half the variance, with N fitted to pi)."""
    mean, cov = reference
    posterior = PosteriorPCN(density, mean, cov, step=step)
    ratio = FunctionDensity(density.dim, lambda x: density.log_density(x) - posterior.log_reference(x))
    return PCN(ratio, mean, cov, step=step)


@pytest.mark.parametrize("method", ["dc", "tt-approx"])
def test_the_matrix_catches_the_inner_pcn_that_counted_its_reference_twice(matrix_files, method, monkeypatch):  # noqa: F811
    monkeypatch.setattr(build, "pcn_kernel", likelihood_pcn_kernel)
    result = run_case(Case(method, "pcn", "laplace", "laplace", ()), matrix_files)
    assert worst_z(result) > Z_LIMIT
    sd = np.asarray(result.to_inference_data().posterior["coef"].std(("chain", "draw")))
    _, true_sd = regression_posterior(regression_data())
    assert np.all(sd < 0.85 * true_sd)  # about 1/sqrt(2) of them
