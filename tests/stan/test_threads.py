"""Every entry point of the bridge raises a Python exception at a Stan error, in any thread.

Chains run in threads (MH and the discretizing chain call ``log_density``
without ``propto`` there); a Stan exception met in a thread other than the
main one once crashed the process (the error path freed autodiff memory of
a thread that had none).
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.stan import StanDomainError, StanModel


def in_thread(call, *args, **kwargs):
    """Run ``call`` in a new thread and return its result (or raise its exception here)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args, **kwargs).result()


@pytest.fixture(scope="module")
def model(reject_program):
    return StanModel(reject_program)


@pytest.mark.parametrize("propto", [True, False])
@pytest.mark.parametrize("jacobian", [True, False])
def test_log_density_raises_in_a_thread(model, propto, jacobian):
    with pytest.raises(StanDomainError, match="above the limit 3"):
        in_thread(model.log_density, np.array([4.0]), propto=propto, jacobian=jacobian)
    with pytest.raises(StanDomainError, match="z"):  # the transformed parameter's bound
        in_thread(model.log_density, np.array([7.0]), propto=propto, jacobian=jacobian)
    assert in_thread(model.log_density, np.array([0.0]), propto=propto, jacobian=jacobian) == pytest.approx(
        0.0 if propto else -0.5 * np.log(2 * np.pi)
    )


@pytest.mark.parametrize("propto", [True, False])
def test_gradient_raises_in_a_thread(model, propto):
    with pytest.raises(StanDomainError, match="above the limit 3"):
        in_thread(model.log_density_gradient, np.array([4.0]), propto=propto)
    lp, grad = in_thread(model.log_density_gradient, np.array([1.0]), propto=propto)
    assert grad[0] == pytest.approx(-1.0)


def test_write_array_raises_in_a_thread(model):
    with pytest.raises(StanDomainError, match="generated quantities: y is"):
        in_thread(model.param_constrain, np.array([2.5]), include_tp=True, include_gq=True)
    with pytest.raises(StanDomainError, match="z"):
        in_thread(model.param_constrain, np.array([7.0]), include_tp=True)
    values = in_thread(model.param_constrain, np.array([1.0]), include_tp=True, include_gq=True, seed=3)
    assert values[:2] == pytest.approx([1.0, 1.0])  # y and z; w is a normal_rng draw
    again = in_thread(model.param_constrain, np.array([1.0]), include_tp=True, include_gq=True, seed=3)
    assert values[2] == again[2]  # the seed reproduces generated quantities


def test_many_threads_at_once(model):
    points = np.linspace(-1.0, 5.0, 64)

    def evaluate(y):
        try:
            return model.log_density(np.array([y]), propto=False)
        except StanDomainError:
            return None

    with ThreadPoolExecutor(4) as pool:
        values = list(pool.map(evaluate, points))
    assert [v is None for v in values] == list(points > 3)


def test_a_point_that_is_not_numbers_is_named(model):
    with pytest.raises(TypeError, match=r"parameter vector must be a float array of shape \(1,\), got str"):
        model.log_density("abc")
    with pytest.raises(TypeError, match="parameter vector"):
        model.log_density_gradient("abc")
    with pytest.raises(ValueError, match=r"has shape \(\), expected \(1,\)"):
        model.log_density(None)


def test_a_cheap_evaluation_keeps_the_gil_and_an_expensive_one_releases_it(model, gp_program):
    # The reject program's gradient takes about a microsecond: the GIL stays held, as a hand-off would
    # cost more. A call stretched past 10 us (the machine busy elsewhere) releases it once; so, most.
    kept = 0
    for _ in range(100):
        model.log_density_gradient(np.array([0.5]))
        kept += not model.releases_gil
    assert kept >= 50
    # A Gaussian process on 80 points (a Cholesky factor with autodiff: about 0.5 ms) releases it.
    gp = StanModel(gp_program, generate("gp_ard", N=80, D=2, seed=3).data)
    for _ in range(5):
        gp.log_density_gradient(np.zeros(gp.dim))
        assert gp.releases_gil
