"""The PDE posterior through the sampling engine: its warm-up, summaries, settings and errors."""

import numpy as np
import pytest

from stanaccel.pde import elliptic_posterior
from stanaccel.sampling import ConfigError, make_config, sample
from stanaccel.sampling.pde_target import PDETarget


@pytest.fixture(scope="module")
def target():
    return PDETarget(elliptic_posterior(n=10, degree=1, regime="observations", seed=2))


def test_with_data_gives_own_counters_and_tempers_the_likelihood(target):
    posterior = target.posterior
    xi = np.linspace(-1, 1, target.dim)
    first, prior = target.with_data(), target.with_data({"beta": 0.0})
    assert first.log_density(xi) == pytest.approx(posterior.log_likelihood(xi) - 0.5 * xi @ xi)
    assert prior.log_density(xi) == pytest.approx(-0.5 * xi @ xi)
    assert (first.n_log_density, prior.n_log_density, posterior.n_log_density) == (1, 1, 0)
    half = target.with_data({"beta": 0.5}).log_density_gradient(xi)[1]
    full = first.log_density_gradient(xi)[1]
    assert np.allclose(half, 0.5 * (full + xi) - xi)
    with pytest.raises(ValueError, match="only beta"):
        target.with_data({"sigma": 1.0})


def test_summaries_are_the_log_likelihood_the_field_mean_and_the_sensors(target):
    rng = np.random.default_rng(0)
    xi = rng.standard_normal((2, 3, target.dim))
    summaries = target.constrain(xi)
    assert summaries["log_lik"].shape == (2, 3) and summaries["u_sensors"].shape == (2, 3, 25)
    posterior = target.posterior
    u = posterior.field(xi[1, 2])
    assert summaries["log_lik"][1, 2] == pytest.approx(posterior.log_likelihood(xi[1, 2]))
    assert np.allclose(summaries["u_sensors"][1, 2], posterior.solver.observation @ u)
    assert summaries["u_mean"][1, 2] == pytest.approx(u.mean(), abs=0.1)  # nodal mean ~ area mean


def test_pcn_and_h_pcn_run_on_it_with_the_whitened_prior_as_reference(target):
    for method in ("pcn", "h-pcn"):
        result = sample(
            target, method=method, settings={"chains": 2, "draws": 50, "warmup": 20}, progress=False
        )
        assert result.run.positions.shape == (2, 50, target.dim)
        assert set(result.run.constrained) == {"log_lik", "u_mean", "u_sensors"}
        assert result.sources["pcn_step"] == "tuned" and result.exact
        assert 0.05 < result.acceptance < 0.7
        assert "warmup" in result.charged_seconds
    assert result.run.summaries and target.laplace is not None


def test_thin_keeps_every_thin_th_state(target):
    result = sample(target, method="pcn", settings={"chains": 1, "draws": 10, "thin": 5, "tune": 0})
    assert result.run.positions.shape[1] == 10 and result.iterations == 50


def test_methods_that_need_a_stan_program_are_refused_by_name(target):
    with pytest.raises(ConfigError, match="needs a Stan program"):
        sample(target, method="nuts")
    with pytest.raises(ConfigError, match="subsamples"):
        target.check(make_config("stt", {}))
    with pytest.raises(ConfigError, match="surrogates"):
        target.check(make_config("dc", {"approx": {"kind": "subset", "m": 3}}))


def test_h_pcn_on_a_stan_program_says_what_to_use_instead(mvn_program):
    from stanaccel.datasets import generate

    data = generate("mvn_mean", seed=1, N=20, D=2).data
    with pytest.raises(ConfigError, match="use pcn"):
        sample(mvn_program, data, method="h-pcn", settings={"chains": 1, "draws": 5, "warmup": 50})


@pytest.mark.parametrize("method", ["ae-pcn", "ae-hmc"])
@pytest.mark.slow
def test_latent_samplers_train_on_the_laplace_draws_and_run_exactly(target, method):
    settings = {"chains": 1, "draws": 10, "warmup": 100, "epochs": 5, "latent_dim": 12, "tune": 5}
    result = sample(target, method=method, settings=settings, progress=False)
    assert result.exact and result.reports["autoencoder"]["latent_dim"] == 12
    assert {"warmup", "training"} <= set(result.charged_seconds)
    assert np.all(np.isfinite(result.run.constrained["log_lik"]))
