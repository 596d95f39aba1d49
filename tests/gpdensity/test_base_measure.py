"""The base measure: its exact conditional draw and its quasi-random points."""

import numpy as np
import pytest

from stanaccel.gpdensity import GaussianBase


def test_base_measure_draw_has_the_conjugate_moments():
    """cov ~ inverse-Wishart(n - 1, scatter), mean | cov ~ N(point mean, cov / n): the draws' moments."""
    rng = np.random.default_rng(8)
    points = rng.multivariate_normal([1.0, -2.0], [[1.0, 0.6], [0.6, 2.0]], size=25)
    scatter = (points - points.mean(0)).T @ (points - points.mean(0))
    draws = [GaussianBase.conditional_draw(points, rng) for _ in range(4000)]
    covs = np.array([d.chol @ d.chol.T for d in draws])
    means = np.array([d.mean for d in draws])
    expected_cov = scatter / (len(points) - 1 - 2 - 1)
    se = covs.std(axis=0) / np.sqrt(len(covs))
    assert np.max(np.abs(covs.mean(axis=0) - expected_cov) / se) < 4.5
    assert (
        np.max(np.abs(means.mean(axis=0) - points.mean(0)) / (means.std(axis=0) / np.sqrt(len(means)))) < 4.5
    )
    np.testing.assert_allclose(np.cov(means, rowvar=False), expected_cov / len(points), rtol=0.1, atol=0.005)
    with pytest.raises(ValueError, match="2 points cannot fit"):
        GaussianBase.conditional_draw(points[:2], rng)


def test_quasi_sample_is_finite_where_sobol_gives_zero():
    """Scrambled Sobol' can return exactly 0 (here, seed 108722694), whose normal quantile is -inf."""
    reference = GaussianBase(np.zeros(1), np.eye(1)).quasi_sample(1024, seed=108722694)
    assert np.all(np.isfinite(reference)) and reference.min() < -5
