"""The Result verbs (draws, summary, metrics, to_inference_data, save) on every kind of result.

Kernel runs, hand-made NUTS fits and GP density results need no Stan; one
test samples the session's compiled ``mvn_mean`` program for a real NutsFit.
"""

import dataclasses
import subprocess
import sys

import arviz as az
import numpy as np
import pytest

from stanaccel import Result
from stanaccel.densities import FunctionDensity
from stanaccel.diagnostics.files import OutputError
from stanaccel.gpdensity import GaussianBase, GibbsSampler, SquaredExponential, VariationalFit
from stanaccel.gpdensity.gibbs import GibbsRun
from stanaccel.gpdensity.stan_baseline import StanBaselineFit
from stanaccel.kernels import KernelRun, RandomWalkMetropolis, run_chains
from stanaccel.results import stan_names
from stanaccel.stan.nuts import NutsFit, NutsSettings, sample_nuts

CHAINS, DRAWS = 4, 400


def constrain(x):
    """Named arrays: a scalar and a 2-vector, so draws() must flatten in the dict's order."""
    return {"scale": np.exp(x[..., 0]), "both": x.copy()}


def normal_run(**options) -> KernelRun:
    density = FunctionDensity(2, lambda x: -0.5 * float(x @ x))
    starts = np.random.default_rng(0).normal(size=(CHAINS, 2))
    return run_chains(RandomWalkMetropolis(density, scale=1.2), starts, DRAWS, seed=3, **options)


@pytest.fixture(scope="module")
def kernel_run():
    return normal_run(constrain=constrain)


def test_result_is_a_cheap_mixin():
    """Importing the samplers' result classes does not load ArviZ."""
    code = (
        "import sys, stanaccel.results, stanaccel.kernels.driver, stanaccel.stan.nuts, stanaccel.gpdensity;"
        "assert 'arviz' not in sys.modules, 'arviz imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_results_are_results(kernel_run):
    assert isinstance(kernel_run, Result)
    for cls in (NutsFit, KernelRun, VariationalFit, GibbsRun, StanBaselineFit):
        assert issubclass(cls, Result), cls


def test_cache_is_no_dataclass_field(kernel_run):
    same = dataclasses.replace(kernel_run)
    idata = kernel_run.to_inference_data()
    assert kernel_run.to_inference_data() is idata  # made once
    assert same.to_inference_data() is not idata  # per instance
    assert [f.name for f in dataclasses.fields(KernelRun)][-2:] == ["recorded", "resumed_draws"]
    assert kernel_run == dataclasses.replace(kernel_run)
    assert "InferenceData" not in repr(kernel_run) and repr(kernel_run) == repr(
        dataclasses.replace(kernel_run)
    )


def test_kernel_run_draws_are_the_constrained_values_flattened(kernel_run):
    draws = kernel_run.draws()
    assert draws.shape == (CHAINS, DRAWS, 3)
    np.testing.assert_array_equal(draws[..., 0], kernel_run.constrained["scale"])
    np.testing.assert_array_equal(draws[..., 1:], kernel_run.positions)
    flat = kernel_run.draws(concat_chains=True)
    assert flat.shape == (CHAINS * DRAWS, 3)
    np.testing.assert_array_equal(flat[DRAWS], draws[1, 0])


def test_column_names_say_which_column_of_draws_is_which(kernel_run):
    assert kernel_run.column_names() == ["scale", "both[1]", "both[2]"]
    assert stan_names("m", (2, 3))[:4] == ["m[1,1]", "m[1,2]", "m[1,3]", "m[2,1]"]  # row-major, as draws()
    fit = fake_nuts_fit()
    assert fit.column_names() == ["mu", "tau", "v[1]", "v[2]"] and fit.draws().shape[-1] == 4


def test_kernel_run_without_constrain_draws_the_positions():
    run = normal_run()
    np.testing.assert_array_equal(run.draws(), run.positions)
    assert run.draws(concat_chains=True).shape == (CHAINS * DRAWS, 2)
    assert list(run.summary().index) == ["theta_unc[1]", "theta_unc[2]"]


def test_kernel_run_inference_data_summary_and_metrics(kernel_run):
    idata = kernel_run.to_inference_data()
    np.testing.assert_array_equal(idata.posterior["both"].values, kernel_run.constrained["both"])
    table = kernel_run.summary()
    assert list(table.index) == ["scale", "both[1]", "both[2]"]
    assert np.all(np.abs(table.loc[["both[1]", "both[2]"], "mean"]) < 0.3)
    assert list(kernel_run.summary(var_names=["both"]).index) == ["both[1]", "both[2]"]
    metrics = kernel_run.metrics()
    assert metrics["chains"] == CHAINS and metrics["draws_per_chain"] == DRAWS
    assert 50 < metrics["ess_bulk_min"] < CHAINS * DRAWS and metrics["rhat_max"] < 1.1
    assert metrics["wall_seconds"] == kernel_run.wall_seconds
    assert metrics["gradient_evaluations"] == kernel_run.evaluations.sum() > CHAINS * DRAWS
    assert metrics["ess_per_second"] == pytest.approx(metrics["ess_bulk_min"] / kernel_run.wall_seconds)


def assert_saved(result, path):
    written = result.save(path)
    assert written == path and path.is_file()
    back = az.from_netcdf(path)
    posterior = result.to_inference_data().posterior
    assert set(back.posterior.data_vars) == set(posterior.data_vars)
    for name in posterior.data_vars:
        np.testing.assert_array_equal(back.posterior[name].values, posterior[name].values)
    return back


def test_kernel_run_saves_what_arviz_reads(kernel_run, tmp_path):
    back = assert_saved(kernel_run, tmp_path / "run.nc")
    assert back.posterior.attrs["sampler"] == "RandomWalkMetropolis"
    np.testing.assert_array_equal(back.unconstrained_posterior["theta_unc"].values, kernel_run.positions)


def test_save_makes_its_folder_and_raises_where_it_cannot_write(kernel_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    written = kernel_run.save(tmp_path / "no such folder" / "run.nc")  # made, as the command line makes it
    np.testing.assert_array_equal(
        az.from_netcdf(written).posterior["scale"].values, kernel_run.constrained["scale"]
    )
    blocked = tmp_path / "blocked.nc"
    blocked.mkdir()  # a folder where the file should go
    with pytest.raises(OutputError, match=f"cannot write {blocked}: Is a directory"):
        kernel_run.save(blocked)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked.nc", "no such folder"]  # no rescue file


@pytest.mark.parametrize(
    ("path", "error", "said"),
    [
        (5, TypeError, r"save\(path\): path must be a netCDF file's name, .*; not int \(5\)"),
        ("", ValueError, r"save\(path\): path = '' names no file: give a file name such as 'fit.nc'"),
        (".", ValueError, r"path = '.' names no file"),
    ],
)
def test_save_refuses_a_path_that_names_no_file(kernel_run, tmp_path, monkeypatch, path, error, said):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=said):
        kernel_run.save(path)
    assert list(tmp_path.iterdir()) == []


def fake_nuts_fit(chains=2, draws=50, warmup=10) -> NutsFit:
    """A NutsFit of two scalars and a 2-vector (Stan's flat names), built without Stan."""
    rng = np.random.default_rng(1)

    def stats(n):
        return {"lp": rng.normal(size=(chains, n)), "n_steps": np.full((chains, n), 3),
                "diverging": np.zeros((chains, n), dtype=bool)}  # fmt: skip

    return NutsFit(
        param_names=["mu", "tau", "v.1", "v.2"],
        variables=[("mu", ()), ("tau", ()), ("v", (2,))],
        draws_constrained=rng.normal(size=(chains, draws, 4)),
        draws_unconstrained=rng.normal(size=(chains, draws, 3)),
        warmup_constrained=rng.normal(size=(chains, warmup, 4)),
        warmup_unconstrained=rng.normal(size=(chains, warmup, 3)),
        sample_stats=stats(draws),
        warmup_sample_stats=stats(warmup),
        step_size=np.full(chains, 0.5),
        inv_metric=np.ones((chains, 3)),
        chain_seconds=np.full(chains, 0.1),
        wall_seconds=0.25,
        settings=NutsSettings(chains=chains, warmup=warmup, draws=draws),
    )


def test_nuts_fit_verbs(tmp_path):
    fit = fake_nuts_fit()
    assert fit.draws().shape == (2, 50, 4)
    assert fit.draws(inc_warmup=True).shape == (2, 60, 4)
    assert fit.draws(inc_warmup=True, concat_chains=True).shape == (120, 4)
    assert list(fit.summary().index) == ["mu", "tau", "v[1]", "v[2]"]
    metrics = fit.metrics()
    assert {"ess_bulk_min", "rhat_max"} <= set(metrics)
    assert metrics["gradient_evaluations"] == 3 * 2 * 60 and metrics["wall_seconds"] == 0.25
    assert fit == dataclasses.replace(fit) and "InferenceData" not in repr(fit)
    back = assert_saved(fit, tmp_path / "fit.nc")
    assert back.warmup_posterior["mu"].shape == (2, 10)


def test_real_nuts_fit_verbs(mvn_model, tmp_path):
    fit = sample_nuts(mvn_model, chains=2, warmup=150, draws=100, seed=2, progress=False)
    assert fit.draws().shape == (2, 100, len(fit.param_names))
    table = fit.summary()
    assert len(table) == len(fit.param_names)
    metrics = fit.metrics()
    assert metrics["ess_bulk_min"] > 20 and metrics["rhat_max"] < 1.1
    assert metrics["gradient_evaluations"] == fit.gradient_evaluations
    assert_saved(fit, tmp_path / "nuts.nc")


@pytest.fixture(scope="module")
def gibbs_data():
    rng = np.random.default_rng(4)
    return np.concatenate([rng.normal(-1.5, 0.4, 25), rng.normal(1.0, 0.6, 25)])


def test_gibbs_run_is_its_dict_and_a_result(gibbs_data, tmp_path):
    grid = np.linspace(-3, 3, 7)[:, None]
    run = GibbsSampler(gibbs_data).run(30, warmup=10, seed=5, at=grid, n_normaliser=256)
    assert isinstance(run, dict) and run["density"].shape == (30, 7) and run["n_events"].shape == (30,)
    assert run.wall_seconds > 0
    posterior = run.to_inference_data().posterior
    assert posterior["density"].shape == (1, 30, 7) and posterior["lambda"].shape == (1, 30)
    # lambda, n_events, mu0, amplitude, lengthscales (1), base_mean (1), base_chol (1), density (7)
    n = 7 + 7
    assert run.draws().shape == (1, 30, n) and run.draws(concat_chains=True).shape == (30, n)
    assert len(run.summary()) == n
    metrics = run.metrics()
    assert {"ess_bulk_min", "rhat_max"} <= set(metrics) and metrics["chains"] == 1
    assert metrics["wall_seconds"] == run.wall_seconds
    assert_saved(run, tmp_path / "gibbs.nc")


def test_gibbs_density_kept_less_often_has_its_own_group(gibbs_data):
    run = GibbsSampler(gibbs_data).run(10, seed=1, at=np.zeros((2, 1)), n_normaliser=128, density_every=2)
    idata = run.to_inference_data()
    assert "density" not in idata.posterior and idata.density_posterior["density"].shape == (1, 5, 2)
    assert run.draws().shape == (1, 10, 7)


def variational_fit() -> VariationalFit:
    """A hand-made q over 4 inducing points in 1-D (no TensorFlow)."""
    inducing = np.linspace(-2, 2, 4)[:, None]
    return VariationalFit(
        kernel=SquaredExponential(1.0, np.array([1.0])),
        base=GaussianBase(np.zeros(1), np.eye(1)),
        mu0=0.2,
        inducing=inducing,
        mean=np.array([0.1, 0.5, -0.2, 0.3]),
        cov=0.1 * np.eye(4),
        alpha=120.0,
        elbo=[-50.0, -40.0],
        seconds=1.5,
        iterations=2,
    )


def test_variational_fit_gives_draws_from_q(tmp_path):
    fit = variational_fit()
    idata = fit.to_inference_data()
    assert idata.posterior["density"].shape == (1, 500, 4) and idata.posterior["lambda"].shape == (1, 500)
    assert idata.posterior.attrs["method"] == "variational" and not idata.posterior.attrs["exact"]
    assert fit.draws().shape == (1, 500, 5)
    assert abs(fit.draws()[..., -1].mean() - 120) < 2  # lambda ~ Gamma(alpha, 1)
    assert len(fit.summary()) == 5
    metrics = fit.metrics()
    assert {"ess_bulk_min", "rhat_max"} <= set(metrics) and metrics["wall_seconds"] == 1.5
    back = assert_saved(fit, tmp_path / "q.nc")
    assert back.posterior.attrs["method"] == "variational"
    assert fit.inference_groups(np.zeros((3, 1)), n_draws=7)["posterior"]["density"].shape == (1, 7, 3)


def test_stan_baseline_fit_posterior(tmp_path):
    rng = np.random.default_rng(0)
    fit = StanBaselineFit(
        density=rng.gamma(5.0, 0.05, size=(2, 40, 6)),
        log_z=rng.normal(size=(2, 40)),
        amplitude=rng.gamma(4.0, 0.25, size=(2, 40)),
        lengthscale=rng.gamma(4.0, 0.25, size=(2, 40, 1)),
        mu0=rng.normal(size=(2, 40)),
        wall_seconds=3.0,
        sampling_seconds=1.0,
        gradient_evaluations=800,
        fits=(None, fake_nuts_fit(chains=2, draws=40)),
    )
    assert fit["wall_seconds"] == 3.0  # still the dict it was
    assert fit.draws().shape == (2, 40, 6 + 4)
    assert len(fit.summary()) == 10
    metrics = fit.metrics()
    assert {"ess_bulk_min", "rhat_max"} <= set(metrics)
    assert metrics["sampling_seconds"] == 1.0 and metrics["gradient_evaluations"] == 800
    idata = fit.to_inference_data()
    assert idata.sample_stats["lp"].shape == (2, 40) and not idata.posterior.attrs["exact"]
    assert_saved(fit, tmp_path / "stan.nc")


def test_a_result_without_groups_says_so():
    class NoGroups(Result):
        pass

    with pytest.raises(TypeError, match="abstract method inference_groups"):
        NoGroups()
