"""The Keras autoencoder: training, the NumPy export against TensorFlow, save/load, bad input,
and the exact latent samplers with an autoencoder trained on draws of their target.

Training is real (Keras on TensorFlow), kept small: a few hundred draws and a
capped number of epochs, trained once per module.
"""

import numpy as np
import pytest

from stanaccel.kernels import HMC, Cycle, FunctionDensity, run_chains
from stanaccel.latent import Autoencoder, AutoencoderHMC, AutoencoderPCN, decoder_data, tune_step
from tests.kernels.test_kernels import assert_moments_within_mcse

D, LATENT = 6, 2
RNG = np.random.default_rng(7)
_LOADINGS = RNG.standard_normal((D, LATENT)) * 2.0
COV = _LOADINGS @ _LOADINGS.T + np.diag(np.full(D, 0.3))  # most variance in two directions
MEAN = RNG.normal(0, 2, D)
SD = np.sqrt(np.diag(COV))
PRECISION = np.linalg.inv(COV)
FAST = {"epochs": 150, "patience": 15}


def gaussian() -> FunctionDensity:
    return FunctionDensity(
        D, lambda x: -0.5 * (x - MEAN) @ PRECISION @ (x - MEAN), lambda x: -PRECISION @ (x - MEAN)
    )


@pytest.fixture(scope="module")
def draws():
    return np.random.default_rng(1).multivariate_normal(MEAN, COV, size=400)


@pytest.fixture(scope="module", params=["linear", "tanh"])
def trained(request, draws):
    return Autoencoder.fit(draws, latent_dim=LATENT, architecture=request.param, seed=2, **FAST)


@pytest.mark.slow
def test_training_reconstructs_the_dominant_directions(trained, draws):
    report = trained.reconstruction(draws)
    assert report["explained_variance"] > 0.8, report
    assert trained.report.epochs <= FAST["epochs"]
    assert trained.report.validation_loss[-1] < trained.report.validation_loss[0]
    assert trained.latent_dim == LATENT and trained.dim == D


@pytest.mark.slow
def test_numpy_decoder_and_its_vjp_match_tensorflow(trained, draws):
    import tensorflow as tf

    maps = trained.maps()
    points = draws[:5]
    np.testing.assert_allclose(maps.encode(points), trained.encode(points), atol=1e-6, rtol=0)
    codes = trained.encode(points)
    np.testing.assert_allclose(maps.decode(codes), trained.decode(codes), atol=1e-6, rtol=0)
    v = np.random.default_rng(3).standard_normal((5, D))
    for z, vector in zip(codes, v, strict=True):
        z_tf = tf.Variable(z[None], dtype=tf.float64)
        with tf.GradientTape() as tape:
            output = trained.mean + trained.scale * trained.decoder(z_tf)
            scalar = tf.reduce_sum(output * vector)
        expected = tape.gradient(scalar, z_tf).numpy()[0]
        np.testing.assert_allclose(maps.decode_vjp(z, vector)[1], expected, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_save_and_load_round_trip(trained, draws, tmp_path):
    trained.save(tmp_path / "ae")
    loaded = Autoencoder.load(tmp_path / "ae")
    assert loaded.architecture == trained.architecture
    np.testing.assert_array_equal(loaded.mean, trained.mean)
    np.testing.assert_array_equal(loaded.latent_cov, trained.latent_cov)
    np.testing.assert_allclose(
        loaded.decode(loaded.encode(draws[:10])), trained.decode(trained.encode(draws[:10]))
    )
    assert loaded.report.epochs == trained.report.epochs
    with pytest.raises(FileNotFoundError, match="no saved autoencoder"):
        Autoencoder.load(tmp_path / "missing")


@pytest.mark.slow
def test_decoder_data_for_the_latent_stan_program(trained):
    maps = trained.maps()
    data = decoder_data(maps)
    z = np.array([0.3, -0.7])
    h = data["W1"] @ z + data["b1"]
    h = np.tanh(h) if data["hidden_tanh"] else h
    np.testing.assert_allclose(
        data["location"] + data["scale"] * (data["W2"] @ h + data["b2"]), maps.decode(z)
    )


@pytest.mark.parametrize(
    "bad, message",
    [
        (np.zeros((10, D)), "only 10 training draws"),
        (
            np.column_stack([np.ones(50), np.random.default_rng(0).standard_normal((50, D - 1))]),
            r"coordinates \[0\]",
        ),
        (
            np.where(np.arange(50)[:, None] == 7, np.nan, np.random.default_rng(0).standard_normal((50, D))),
            "row 7",
        ),
        (np.zeros(D), "shape"),
    ],
)
def test_degenerate_training_input_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        Autoencoder.fit(bad, latent_dim=LATENT, **FAST)


def test_bad_training_options_are_refused(draws):
    with pytest.raises(ValueError, match="latent_dim"):
        Autoencoder.fit(draws, latent_dim=D)
    with pytest.raises(ValueError, match="architecture"):
        Autoencoder.fit(draws, architecture="relu")


@pytest.mark.parametrize("method", ["ae-hmc", "ae-pcn"])
@pytest.mark.slow
def test_exact_modes_recover_the_moments_with_a_trained_autoencoder(trained, method):
    maps = trained.maps()
    if method == "ae-hmc":

        def make(h):
            return AutoencoderHMC(gaussian(), maps, step_size=h, n_steps=6, exact=True)
    else:

        def make(h):
            return AutoencoderPCN(gaussian(), maps, exact=True, step=h)

    tuned = tune_step(
        make,
        MEAN,
        np.random.default_rng(0),
        target=0.7 if method == "ae-hmc" else 0.3,
        initial=0.3,
        maximum=20.0 if method == "ae-hmc" else 1.0,  # a local pCN move: rho >= 0.6
    )
    latent = make(tuned)
    kernel = Cycle([latent, HMC(latent.density, step_size=0.3, n_steps=3, inv_metric=np.full(D, 0.3))])
    starts = np.random.default_rng(5).multivariate_normal(MEAN, COV, size=4)
    run = run_chains(kernel, starts, 2000, seed=9)
    assert_moments_within_mcse(run.positions, MEAN, SD)
    assert run.summaries[0]["latent_acceptance"] > 0.2
