"""Stan's NUTS through the bridge: exactness, reproducibility, outputs, interruption."""

import _thread
import threading

import numpy as np
import pytest

from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.diagnostics import mcse_z_scores, to_inference_data
from stanaccel.stan import StanEvaluationError, StanModel
from stanaccel.stan.nuts import sample_nuts


@pytest.fixture(scope="module")
def mvn_fit(mvn_model):
    return sample_nuts(mvn_model, chains=4, warmup=500, draws=1000, seed=11, progress=False)


def test_nuts_recovers_the_exact_posterior(mvn_fit, mvn_data):
    mean, cov = exact_posterior(mvn_data)
    idata = to_inference_data(mvn_fit)
    z_mean, z_sd = mcse_z_scores(idata, "theta", mean, np.sqrt(np.diag(cov)))
    assert np.all(np.abs(z_mean) < 3.5), z_mean
    assert np.all(np.abs(z_sd) < 3.5), z_sd


def test_nuts_is_reproducible_with_a_seed(mvn_model, mvn_fit):
    again = sample_nuts(mvn_model, chains=4, warmup=500, draws=1000, seed=11, progress=False)
    np.testing.assert_array_equal(again.draws(), mvn_fit.draws())
    other = sample_nuts(mvn_model, chains=4, warmup=500, draws=1000, seed=12, progress=False)
    assert not np.array_equal(other.draws(), mvn_fit.draws())


def test_fit_shapes_and_statistics(mvn_fit, mvn_model):
    assert mvn_fit.draws_constrained.shape == (4, 1000, 3)
    assert mvn_fit.draws_unconstrained.shape == (4, 1000, 3)
    assert mvn_fit.warmup_unconstrained.shape == (4, 500, 3)
    np.testing.assert_allclose(mvn_fit.draws_constrained, mvn_fit.draws_unconstrained)  # no constraints
    assert set(mvn_fit.sample_stats) == {
        "lp",
        "acceptance_rate",
        "step_size",
        "tree_depth",
        "n_steps",
        "diverging",
        "energy",
        "failed",  # proposals the program rejected: none here
    }
    assert mvn_fit.sample_stats["diverging"].dtype == bool and not mvn_fit.sample_stats["failed"].any()
    assert mvn_fit.step_size.shape == (4,) and np.all(mvn_fit.step_size > 0)
    assert mvn_fit.inv_metric.shape == (4, 3)
    np.testing.assert_allclose(mvn_fit.sample_stats["step_size"][:, -1], mvn_fit.step_size)
    assert (
        mvn_fit.gradient_evaluations
        == mvn_fit.sample_stats["n_steps"].sum() + mvn_fit.warmup_sample_stats["n_steps"].sum()
    )
    assert mvn_fit.stan_variable("theta").shape == (4000, 3)
    # lp__ is the log density (propto, with Jacobian) at the unconstrained draw.
    lp = mvn_model.log_density(mvn_fit.draws_unconstrained[2, 7])
    assert mvn_fit.sample_stats["lp"][2, 7] == pytest.approx(lp, rel=1e-5)


def test_unconstrained_draws_match_constrained_ones(gp_model):
    fit = sample_nuts(gp_model, chains=2, warmup=200, draws=50, seed=2, progress=False)
    for c in range(2):
        for d in (0, 49):
            np.testing.assert_allclose(
                gp_model.param_constrain(fit.draws_unconstrained[c, d]),
                fit.draws_constrained[c, d],
                rtol=1e-5,
            )
    assert np.all(fit.draws_constrained > 0)


def test_dense_metric_and_fixed_settings(mvn_model):
    dense = sample_nuts(mvn_model, chains=2, warmup=300, draws=100, seed=3, metric="dense", progress=False)
    assert dense.inv_metric.shape == (2, 3, 3)
    np.testing.assert_allclose(dense.inv_metric, np.swapaxes(dense.inv_metric, 1, 2))
    fixed = sample_nuts(
        mvn_model,
        chains=2,
        warmup=0,
        draws=100,
        seed=3,
        adapt=False,
        step_size=0.25,
        inits=np.zeros(3),
        progress=False,
    )
    assert np.all(fixed.sample_stats["step_size"] == 0.25)
    assert fixed.warmup_constrained.shape == (2, 0, 3)


def test_continuing_from_a_warmup_state(mvn_model, mvn_fit):
    state = mvn_fit.warmup_state()
    more = sample_nuts(mvn_model, warmup_from=state, draws=50, seed=5, progress=False)
    assert more.chains == 4 and more.num_draws == 50
    np.testing.assert_array_equal(more.step_size, state.step_size)
    np.testing.assert_allclose(more.sample_stats["step_size"][:, 0], state.step_size)


def test_inference_data_groups_and_netcdf(tmp_path, mvn_fit):
    idata = to_inference_data(mvn_fit)
    for group in ("posterior", "sample_stats", "warmup_posterior", "unconstrained_posterior", "adaptation"):
        assert group in idata.groups()
    assert idata.posterior["theta"].shape == (4, 1000, 3)
    assert idata.adaptation["inv_metric"].shape == (4, 3)
    assert idata.posterior.attrs["sampler"] == "Stan NUTS"
    idata.to_netcdf(str(tmp_path / "fit.nc"))
    from stanaccel.diagnostics._arviz import az

    back = az.from_netcdf(str(tmp_path / "fit.nc"))
    np.testing.assert_array_equal(back.posterior["theta"].values, idata.posterior["theta"].values)


def test_bad_settings_are_refused(mvn_model):
    with pytest.raises(ValueError, match="metric"):
        sample_nuts(mvn_model, metric="unit", progress=False)
    with pytest.raises(ValueError, match="delta"):
        sample_nuts(mvn_model, delta=1.5, progress=False)
    with pytest.raises(ValueError, match="inits"):
        sample_nuts(mvn_model, chains=2, inits=np.zeros((3, 3)), progress=False)
    with pytest.raises(ValueError, match="inv_metric"):
        sample_nuts(mvn_model, inv_metric=np.ones(4), progress=False)


def test_failed_initialisation_is_reported(reject_program):
    model = StanModel(reject_program)
    with pytest.raises(StanEvaluationError, match="above the limit 3"):
        sample_nuts(model, chains=1, inits={"y": 5.0}, progress=False)


def test_failed_initialisation_names_the_data_values_that_may_be_why(mvn_program, mvn_data):
    x = np.array(mvn_data["x"], dtype=float)
    x[2, 1] = 1e300  # its square overflows: the log density is -inf everywhere
    model = StanModel(mvn_program, {**mvn_data, "x": x})
    with pytest.raises(StanEvaluationError, match=r"Initialization failed") as error:
        sample_nuts(model, chains=1, warmup=10, draws=10, progress=False)
    assert "\nThe data hold x[3][2] = 1e+300: NaN, infinity, or a value beyond ±1e150" in str(error.value)


def test_interrupted_run_keeps_its_draws(mvn_model, sigint_handled):
    # Ctrl-C in the main thread, a little after the run starts.
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    fit = sample_nuts(mvn_model, chains=2, warmup=100, draws=10_000_000, seed=1, progress=False)
    timer.cancel()
    assert fit.interrupted
    assert 0 < fit.num_draws < 10_000_000
    assert fit.warmup_constrained.shape[1] == 100
    assert np.all(np.isfinite(fit.draws()))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        (
            {"chians": 2},
            r"unknown NUTS setting 'chians' \(did you mean 'chains'\?\); the settings are chains, ",
        ),
        ({"chains": "2"}, r"chains = '2': expected an integer"),
        ({"adapt": "no"}, r"adapt = 'no': expected True or False"),
        ({"seed": 1.5}, r"seed = 1.5: expected a non-negative integer below 2\*\*32"),
    ],
)
def test_settings_of_the_wrong_name_or_type_are_refused_naming_them(mvn_model, settings, said):
    with pytest.raises(ValueError, match=said):
        sample_nuts(mvn_model, warmup=10, draws=10, progress=False, **settings)


def test_an_inverse_metric_that_is_no_variance_is_refused_naming_its_entry(mvn_model):
    with pytest.raises(ValueError, match=r"inv_metric\[1\] = -1: .* must be positive and finite .*theta\.2"):
        sample_nuts(mvn_model, chains=1, inv_metric=np.array([1.0, -1.0, 1.0]), progress=False)
    per_chain = np.array([[1.0, 1.0, 1.0], [np.nan, 1.0, 1.0]])
    with pytest.raises(ValueError, match=r"inv_metric\[1, 0\] = nan"):
        sample_nuts(mvn_model, chains=2, inv_metric=per_chain, progress=False)
    not_positive = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    with pytest.raises(
        ValueError, match=r"inv_metric is not positive definite \(its smallest eigenvalue is -1\)"
    ):
        sample_nuts(mvn_model, chains=1, metric="dense", inv_metric=not_positive, progress=False)


def test_an_init_where_stan_cannot_start_is_named_with_why(reject_program, mvn_model):
    with pytest.raises(
        StanEvaluationError, match=r'NUTS chain 0 cannot start from its init, \{"y": 5.0\}: Stan refused it'
    ):
        sample_nuts(StanModel(reject_program), chains=1, inits={"y": 5.0}, progress=False)
    overflowing = np.array([1e200, 0.0, 0.0])  # its square overflows: the log density is -inf there
    with pytest.raises(
        StanEvaluationError, match="cannot start from its init, .*: the log density there is -inf"
    ):
        sample_nuts(mvn_model, chains=1, inits=overflowing, progress=False)


def test_a_checkpoint_that_is_a_file_is_refused_before_any_chain_runs(mvn_model, tmp_path):
    file = tmp_path / "fit.nc"
    file.write_text("")
    with pytest.raises(ValueError, match=f"checkpoint {file} is a file: give a folder"):
        sample_nuts(mvn_model, checkpoint=file, progress=False)
    assert file.read_text() == ""
