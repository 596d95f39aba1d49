"""Data generators: nested data sets and the exact mvn_mean posterior."""

import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.datasets.mvn_mean import exact_posterior


@pytest.mark.parametrize("name, key", [("gp_ard", "y"), ("mvn_mean", "x"), ("logistic", "y")])
def test_smaller_data_sets_are_prefixes_of_larger_ones(name, key):
    small = generate(name, N=16, seed=4).data
    large = generate(name, N=64, seed=4).data
    np.testing.assert_allclose(np.asarray(large[key])[:16], small[key], rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_gp_ard_inputs_scale_with_the_mean_length_scale():
    dataset = generate("gp_ard", N=4000, D=3, seed=1)
    sd = np.asarray(dataset.data["x"]).std()
    assert sd == pytest.approx(dataset.truth["ell"].mean(), rel=0.05)


def test_exact_posterior_matches_brute_force_on_a_grid():
    data = generate("mvn_mean", N=5, D=1, seed=2, beta=0.5).data
    mean, cov = exact_posterior(data)
    grid = np.linspace(-6, 6, 20001)
    x = np.asarray(data["x"])[:, 0]
    log_p = (
        -0.5 * grid**2 / data["Sigma0"][0, 0]
        - 0.5 * data["beta"] * ((x[:, None] - grid) ** 2).sum(0) / data["Sigma"][0, 0]
    )
    w = np.exp(log_p - log_p.max())
    w /= w.sum()
    assert mean[0] == pytest.approx((w * grid).sum(), abs=1e-6)
    assert cov[0, 0] == pytest.approx((w * (grid - mean[0]) ** 2).sum(), rel=1e-4)


def test_unknown_generator_is_named():
    with pytest.raises(ValueError, match="no data generator 'gp'"):
        generate("gp")
