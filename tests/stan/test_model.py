"""StanModel: log density and gradient against closed forms and finite differences."""

import threading

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from stanaccel.stan import StanModel, write_data


def mvn_terms(theta, data):
    """Closed-form mvn_mean log density: (propto, full)."""
    x = np.asarray(data["x"])
    beta = data["beta"]
    prior_prec = np.linalg.inv(data["Sigma0"])
    noise_prec = np.linalg.inv(data["Sigma"])
    d0 = theta - data["mu0"]
    dx = x - theta
    quad = -0.5 * d0 @ prior_prec @ d0 - 0.5 * beta * np.einsum("ni,ij,nj->", dx, noise_prec, dx)
    full = multivariate_normal(data["mu0"], data["Sigma0"]).logpdf(theta) + beta * np.sum(
        multivariate_normal(theta, data["Sigma"]).logpdf(x)
    )
    grad = -prior_prec @ d0 + beta * noise_prec @ dx.sum(0)
    return quad, full, grad


@pytest.mark.parametrize("propto", [True, False])
@pytest.mark.parametrize("jacobian", [True, False])
def test_mvn_mean_matches_closed_form(mvn_model, mvn_data, propto, jacobian):
    rng = np.random.default_rng(0)
    for _ in range(3):
        theta = rng.normal(size=3)
        quad, full, grad = mvn_terms(theta, mvn_data)
        expected = quad if propto else full  # no constraints: the Jacobian term is zero
        assert mvn_model.log_density(theta, propto=propto, jacobian=jacobian) == pytest.approx(
            expected, rel=1e-10
        )
        lp, g = mvn_model.log_density_gradient(theta, propto=propto, jacobian=jacobian)
        assert lp == pytest.approx(expected, rel=1e-10)
        np.testing.assert_allclose(g, grad, rtol=1e-9, atol=1e-9)


def finite_difference_gradient(f, x, h=1e-6):
    grad = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        grad[i] = (f(x + e) - f(x - e)) / (2 * h)
    return grad


@pytest.mark.parametrize("propto", [True, False])
@pytest.mark.parametrize("jacobian", [True, False])
@pytest.mark.parametrize("which", ["gp_model", "logistic_model"])
def test_gradient_matches_finite_differences(request, which, propto, jacobian):
    model = request.getfixturevalue(which)
    rng = np.random.default_rng(1)
    theta = rng.normal(scale=0.5, size=model.dim)
    lp, grad = model.log_density_gradient(theta, propto=propto, jacobian=jacobian)
    assert lp == pytest.approx(model.log_density(theta, propto=propto, jacobian=jacobian), rel=1e-12)
    fd = finite_difference_gradient(lambda t: model.log_density(t, propto=propto, jacobian=jacobian), theta)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5)


def test_jacobian_and_constants_of_positive_parameters(gp_model):
    # gp_ard's parameters are all <lower=0>: the log Jacobian is the sum of the
    # unconstrained values, and propto drops a constant that does not depend on theta.
    rng = np.random.default_rng(2)
    offsets = []
    for _ in range(3):
        theta = rng.normal(size=gp_model.dim)
        with_j = gp_model.log_density(theta, jacobian=True, propto=False)
        without_j = gp_model.log_density(theta, jacobian=False, propto=False)
        assert with_j - without_j == pytest.approx(theta.sum(), rel=1e-10)
        offsets.append(gp_model.log_density(theta, propto=False) - gp_model.log_density(theta, propto=True))
    np.testing.assert_allclose(offsets, offsets[0], rtol=1e-10)
    assert offsets[0] != 0


def test_constrain_unconstrain_round_trip(gp_model):
    theta = np.array([0.3, 2.0, 1.5, 0.2])  # ell (2), sigma_f, sigma_n: all positive
    unc = gp_model.param_unconstrain(theta)
    np.testing.assert_allclose(unc, np.log(theta), rtol=1e-12)
    np.testing.assert_allclose(gp_model.param_constrain(unc), theta, rtol=1e-12)


def test_log_scale_coordinates_are_the_bounded_scales(gp_model, mvn_model):
    assert gp_model.log_scale_coordinates().tolist() == [True] * 4  # ell (2), sigma_f, sigma_n
    assert not mvn_model.log_scale_coordinates().any()  # theta: unbounded


def test_names_sizes_and_shapes(gp_model, mvn_model):
    assert gp_model.dim == gp_model.param_unc_num() == 4
    assert gp_model.param_num() == 4
    assert gp_model.param_names() == ["ell.1", "ell.2", "sigma_f", "sigma_n"]
    assert gp_model.variables() == [("ell", (2,)), ("sigma_f", ()), ("sigma_n", ())]
    values = gp_model.unflatten(np.arange(8.0).reshape(2, 4))
    np.testing.assert_array_equal(values["ell"], [[0, 1], [4, 5]])
    np.testing.assert_array_equal(values["sigma_n"], [3, 7])
    assert "mvn_mean_model" in repr(mvn_model)


def test_with_data_reuses_the_compiled_program(mvn_model, mvn_data):
    cold = mvn_model.with_data({**mvn_data, "beta": 0.25})
    assert cold.program is mvn_model.program
    theta = np.array([0.1, -0.2, 0.3])
    quad, _, _ = mvn_terms(theta, {**mvn_data, "beta": 0.25})
    assert cold.log_density(theta) == pytest.approx(quad, rel=1e-10)
    subset = mvn_model.with_data({**mvn_data, "N": 5, "x": np.asarray(mvn_data["x"])[:5]})
    quad5, _, _ = mvn_terms(theta, {**mvn_data, "x": np.asarray(mvn_data["x"])[:5]})
    assert subset.log_density(theta) == pytest.approx(quad5, rel=1e-10)


def test_instances_on_the_same_data_share_stans_instance_and_count_apart(mvn_model, mvn_data):
    theta = np.array([0.1, -0.2, 0.3])
    same = [mvn_model.with_data(dict(mvn_data)) for _ in range(2)]  # equal data, other dicts
    assert same[0]._model is same[1]._model
    other_seed = mvn_model.with_data(mvn_data, seed=mvn_model.seed + 1)
    changed = mvn_model.with_data({**mvn_data, "beta": 0.5})
    assert other_seed._model is not same[0]._model and changed._model is not same[0]._model
    same[0].log_density(theta)
    assert same[0].n_log_density == 1 and same[1].n_log_density == 0
    assert same[1].log_density(theta) == mvn_model.log_density(theta) != changed.log_density(theta)
    assert StanModel(mvn_model.program, mvn_data)._model is same[0]._model


def test_data_from_stan_json_file(tmp_path, mvn_model, mvn_data):
    path = write_data(tmp_path / "data.json", mvn_data)
    from_file = StanModel(mvn_model.program, path)
    theta = np.array([0.5, 0.5, -1.0])
    assert from_file.log_density(theta) == mvn_model.log_density(theta)


def test_evaluation_counts(mvn_model):
    before = (mvn_model.n_log_density, mvn_model.n_gradient)
    mvn_model.log_density(np.zeros(3))
    mvn_model.log_density_gradient(np.zeros(3))
    mvn_model.log_density_gradient(np.zeros(3))
    assert (mvn_model.n_log_density, mvn_model.n_gradient) == (before[0] + 1, before[1] + 2)


def test_gradient_out_buffer_is_filled_in_place(gp_model):
    out = np.zeros(gp_model.dim)
    lp, grad = gp_model.log_density_gradient(np.zeros(gp_model.dim), out=out)
    assert grad is out
    np.testing.assert_array_equal(out, gp_model.log_density_gradient(np.zeros(gp_model.dim))[1])


def test_threads_evaluate_concurrently_with_the_same_results(gp_model):
    points = np.random.default_rng(3).normal(size=(64, gp_model.dim))
    expected = [gp_model.log_density_gradient(p) for p in points]
    results = [None] * len(points)

    def work(indices):
        for i in indices:
            results[i] = gp_model.log_density_gradient(points[i])

    threads = [threading.Thread(target=work, args=(range(k, len(points), 4),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (lp, g), (lp_e, g_e) in zip(results, expected, strict=True):
        assert lp == lp_e
        np.testing.assert_array_equal(g, g_e)
