"""A gradient with a non-finite entry marks an undefined point, at any size (``stanaccel.densities``)."""

import numpy as np
import pytest

from stanaccel.densities import FEW, FunctionDensity, all_finite, safe_log_density_gradient


@pytest.mark.parametrize("dim", [1, 3, FEW, FEW + 1, 200])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_gradient_entry_anywhere_is_an_undefined_point(dim, bad):
    gradient = np.arange(1.0, dim + 1)
    density = FunctionDensity(dim, lambda x: -0.5 * float(x @ x), lambda x: gradient)
    value, grad = safe_log_density_gradient(density, np.zeros(dim))
    assert value == 0.0 and np.array_equal(grad, gradient) and grad is not gradient  # a copy
    for i in {0, dim // 2, dim - 1}:
        broken = gradient.copy()
        broken[i] = bad
        assert not all_finite(broken)
        density = FunctionDensity(dim, lambda x: 0.0, lambda x, broken=broken: broken)
        assert safe_log_density_gradient(density, np.zeros(dim)) == (-np.inf, None)


def test_all_finite_reads_every_entry_of_any_shape():
    assert all_finite(np.ones((4, 5))) and all_finite(np.empty(0)) and all_finite(np.full(3, 1e308))
    assert not all_finite(np.array([[1.0, 2.0], [3.0, np.nan]]))
