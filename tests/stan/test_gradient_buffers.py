"""A gradient buffer that C++ cannot write in place is refused, not silently left unwritten."""

import numpy as np
import pytest


def _read_only(dim):
    out = np.zeros(dim)
    out.flags.writeable = False
    return out


@pytest.mark.parametrize(
    ("make_buffer", "message"),
    [
        (lambda dim: np.zeros(dim, dtype=np.float32), "dtype float64, got float32"),
        (lambda dim: np.zeros(dim, dtype=np.int64), "dtype float64, got int64"),
        (lambda dim: np.zeros(2 * dim)[::2], "C-contiguous"),
        (lambda dim: np.zeros(dim + 1), "shape \\(3,\\), got \\(4,\\)"),
        (lambda dim: np.zeros((1, dim)), "shape \\(3,\\), got \\(1, 3\\)"),
        (_read_only, "read-only"),
        (lambda dim: [0.0] * dim, "NumPy array, got list"),
    ],
    ids=["float32", "int64", "strided", "too-long", "2-d", "read-only", "list"],
)
def test_unusable_gradient_buffer_is_refused(mvn_model, make_buffer, message):
    assert mvn_model.dim == 3
    out = make_buffer(mvn_model.dim)
    before = np.array(out, copy=True)
    calls = mvn_model.n_gradient
    with pytest.raises(ValueError, match=message):
        mvn_model.log_density_gradient(np.full(3, 0.5), out=out)
    np.testing.assert_array_equal(np.asarray(out), before)
    assert mvn_model.n_gradient == calls


def test_usable_gradient_buffer_receives_the_gradient(mvn_model):
    out = np.zeros(mvn_model.dim)
    lp, grad = mvn_model.log_density_gradient(np.full(3, 0.5), out=out)
    expected_lp, expected = mvn_model.log_density_gradient(np.full(3, 0.5))
    assert grad is out
    assert lp == expected_lp
    assert np.any(expected != 0)
    np.testing.assert_array_equal(out, expected)
