"""Every quantity of the user's program from every method: transformed, generated, log_lik.

One program written here (tests/sampling/programs.py QUANTITIES): a
regression with a transformed parameter ``u = exp(coef)``, a generated
quantity drawn with ``normal_rng``, the pointwise ``log_lik`` and a
generated-quantities ``reject`` above a slope set in the data. Each method's
transformed parameters and generated quantities are checked against Stan's
NUTS in combined MCSE units (5 methods x 5 scalars x (mean, sd) = 50
z-scores under 4), and exactly against the parameters draw by draw.
"""

import arviz as az
import numpy as np
import pytest
from scipy.stats import norm

from stanaccel.diagnostics import reference_z_scores
from stanaccel.diagnostics.figures import plotted_coords
from stanaccel.sampling import sample
from stanaccel.sampling.chains import restore, spill
from stanaccel.stan import write_data
from tests.sampling.programs import QUANTITIES, REGRESSION_LATENT, regression_data

OBSERVATIONS = {"count": "N", "fields": ["x", "y"]}
SHORT = {"warmup": 200, "draws": 300, "chains": 2}
METHODS = {
    "nuts": {},
    "hmc": {},
    "mh": {},
    "pt": {"inner": "mh", "levels": 3},
    "dc": {"approx": {"kind": "subset", "m": 30}, "observations": OBSERVATIONS, "moves": 2},
    "ae-pcn": {"latent_dim": 1, "epochs": 30, "tune": 20},
}
SLOPE = 0.5  # in reject.json, generated quantities reject a draw whose slope coef[2] is above this


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantities")
    (folder / "quantities.stan").write_text(QUANTITIES)
    (folder / "regression_latent.stan").write_text(REGRESSION_LATENT)
    data = regression_data()
    write_data(folder / "data.json", {**data, "reject_above": 1e9})
    write_data(folder / "reject.json", {**data, "reject_above": SLOPE})
    return folder, data


def run(files, method, settings=None, data="data.json", seed=4):
    folder, _ = files
    return sample(
        folder / "quantities.stan",
        folder / data,
        method,
        {**SHORT, **METHODS.get(method, {}), **(settings or {})},
        seed=seed,
        progress=False,
    )


@pytest.fixture(scope="module")
def nuts_and_hmc(files):
    """The runs the fast tests read: ``make check`` runs only these two of every method's."""
    return {method: run(files, method) for method in ("nuts", "hmc")}


@pytest.fixture(scope="module")
def results(files, nuts_and_hmc):
    others = {method: run(files, method) for method in METHODS if method not in nuts_and_hmc}
    return {**nuts_and_hmc, **others}


def check_draw_by_draw(result, data):
    """u is exp(coef) and log_lik the pointwise log likelihood, at every draw."""
    idata = result.to_inference_data()
    coef = idata.posterior["coef"].values
    np.testing.assert_allclose(idata.posterior["u"].values, np.exp(coef), rtol=1e-12)
    mean = coef[..., :1] + coef[..., 1:] * data["x"]
    log_lik = idata.log_likelihood["log_lik"].values
    np.testing.assert_allclose(log_lik, norm.logpdf(data["y"], mean, 1.0), rtol=1e-10)


@pytest.mark.parametrize("method", [m for m in METHODS if m != "nuts"])
@pytest.mark.slow
def test_every_method_writes_what_nuts_writes(files, results, method):
    _, data = files
    result, nuts = results[method], results["nuts"]
    idata = result.to_inference_data()
    assert set(idata.posterior.data_vars) == set(nuts.to_inference_data().posterior.data_vars)
    assert set(idata.posterior.data_vars) == {"coef", "u", "y_new"}  # log_lik is not in the posterior
    check_draw_by_draw(result, data)
    z = reference_z_scores(idata, nuts.to_inference_data())
    assert z.shape == (2, 5) and np.all(np.abs(z) < 4), (method, z)
    assert result.quantities_failed == 0 and not idata.sample_stats["quantities_failed"].values.any()


@pytest.mark.slow
def test_nuts_writes_log_lik_as_the_log_likelihood_group(files, results):
    _, data = files
    nuts = results["nuts"]
    check_draw_by_draw(nuts, data)
    idata = nuts.to_inference_data()
    assert "log_lik" not in idata.posterior and idata.log_likelihood["log_lik"].shape == (2, 300, 40)
    assert idata.warmup_log_likelihood["log_lik"].shape == (2, 200, 40)
    assert nuts.run.draws().shape[-1] == len(nuts.run.column_names()) == 45  # every Stan column
    assert nuts.run.column_names()[:5] == ["coef[1]", "coef[2]", "u[1]", "u[2]", "y_new"]


def test_names_as_stan_names_them(nuts_and_hmc):
    results = nuts_and_hmc
    for result in (results["nuts"], results["hmc"]):
        summary = result.summary()
        assert list(summary.index) == ["coef[1]", "coef[2]", "u[1]", "u[2]", "y_new"]
        assert result.column_names() == list(summary.index) and result.draws().shape == (2, 300, 5)
        np.testing.assert_array_equal(
            result.draws()[..., 3], result.to_inference_data().posterior["u"][..., 1]
        )
        assert set(result.metrics()["ess_bulk"]) == set(summary.index)
        assert plotted_coords(result.to_inference_data())[1] == list(summary.index)  # the report's figures
    loo = az.loo(results["hmc"].to_inference_data())  # ArviZ finds the pointwise log likelihood
    assert np.isfinite(loo["elpd_loo"])


def test_generated_quantities_are_reproducible(files, nuts_and_hmc):
    again = run(files, "hmc")
    first = nuts_and_hmc["hmc"].to_inference_data().posterior
    np.testing.assert_array_equal(again.to_inference_data().posterior["y_new"], first["y_new"])
    other = run(files, "hmc", seed=5).to_inference_data().posterior
    assert not np.array_equal(other["y_new"], first["y_new"])
    noise = first["y_new"].values - first["coef"].values @ [1, 0.5]  # normal_rng's own draws, sigma = 1
    assert 0.8 < noise.std() < 1.2


@pytest.mark.parametrize("method", ["nuts", "mh"])
def test_a_generated_quantities_reject_is_nan_and_counted(files, method):
    result = run(files, method, {"warmup": 150, "draws": 150}, data="reject.json")
    idata = result.to_inference_data()
    rejected = idata.posterior["coef"].values[..., 1] > SLOPE
    assert 0 < rejected.sum() < rejected.size
    np.testing.assert_array_equal(idata.sample_stats["quantities_failed"].values, rejected)
    assert result.quantities_failed == rejected.sum() == result.metrics()["quantities_failed"]
    np.testing.assert_array_equal(np.isnan(idata.posterior["y_new"].values), rejected)
    assert np.isnan(idata.log_likelihood["log_lik"].values[rejected]).all()
    assert np.isfinite(idata.log_likelihood["log_lik"].values[~rejected]).all()
    assert np.isfinite(idata.posterior["u"].values).all()  # the transformed parameters are kept
    if method == "mh":
        assert "slope" in idata.posterior.attrs["quantities_error"]


def test_chains_elsewhere_and_spilled_runs_keep_every_quantity(files, nuts_and_hmc, tmp_path):
    local = nuts_and_hmc["hmc"]
    folder, _ = files
    threads = sample(
        folder / "quantities.stan",
        folder / "data.json",
        "hmc",
        SHORT,
        seed=4,
        progress=False,
        executor="threads:2",
    )
    for name in ("coef", "u", "y_new"):
        np.testing.assert_array_equal(threads.run.constrained[name], local.run.constrained[name])
    np.testing.assert_array_equal(threads.run.log_likelihood["log_lik"], local.run.log_likelihood["log_lik"])
    back = restore(spill(local.run, tmp_path))
    for name in ("coef", "u", "y_new"):
        np.testing.assert_array_equal(back.constrained[name], local.run.constrained[name])
    np.testing.assert_array_equal(back.log_likelihood["log_lik"], local.run.log_likelihood["log_lik"])
    np.testing.assert_array_equal(back.quantities_failed, local.run.quantities_failed)


@pytest.mark.slow
def test_latent_nuts_writes_every_quantity(files):
    folder, data = files
    result = run(
        files,
        "latent-nuts",
        {"latent_dim": 1, "epochs": 30, "latent_program": str(folder / "regression_latent.stan")},
    )
    check_draw_by_draw(result, data)
    assert "y_new" in result.to_inference_data().posterior
