"""The latent Stan program (stan/logistic_latent.stan) against the chain rule through the NumPy decoder."""

import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.latent import AutoencoderHMC, DenseLayer, DenseNetwork, LatentMaps, decoder_data
from stanaccel.stan import StanModel

K, LATENT = 6, 2


def maps(kind: str, seed: int = 0) -> LatentMaps:
    rng = np.random.default_rng(seed)
    dim = K + 1
    encoder = DenseNetwork([DenseLayer(rng.standard_normal((LATENT, dim)), np.zeros(LATENT))])
    if kind == "linear":
        decoder = DenseNetwork([DenseLayer(rng.standard_normal((dim, LATENT)), rng.standard_normal(dim))])
    else:
        decoder = DenseNetwork(
            [DenseLayer(rng.standard_normal((5, LATENT)), rng.standard_normal(5), "tanh"),
             DenseLayer(rng.standard_normal((dim, 5)), rng.standard_normal(dim))]
        )  # fmt: skip
    return LatentMaps(encoder, decoder, rng.normal(0, 0.3, dim), rng.uniform(0.2, 0.6, dim))


@pytest.mark.parametrize("kind", ["linear", "tanh"])
def test_latent_program_gives_the_chain_rule_gradient(kind, logistic_program, logistic_latent_program):
    data = generate("logistic", N=50, K=K, seed=1).data
    model = StanModel(logistic_program, data)
    m = maps(kind)
    latent = StanModel(logistic_latent_program, {k: data[k] for k in ("N", "K", "X", "y", "prior_scale")}
                       | decoder_data(m))  # fmt: skip
    offsets = []
    for z in np.random.default_rng(2).standard_normal((5, LATENT)):
        lp, grad = model.log_density_gradient(m.decode(z))
        latent_lp, latent_grad = latent.log_density_gradient(z)
        np.testing.assert_allclose(latent_grad, m.decode_vjp(z, grad)[1], rtol=1e-8, atol=1e-8)
        offsets.append(latent_lp - lp)
    assert np.ptp(offsets) < 1e-8  # the same log density up to a constant


def test_both_routes_give_the_same_chain(logistic_program, logistic_latent_program):
    data = generate("logistic", N=50, K=K, seed=1).data
    m = maps("tanh")
    latent = StanModel(logistic_latent_program, {k: data[k] for k in ("N", "K", "X", "y", "prior_scale")}
                       | decoder_data(m))  # fmt: skip
    positions = []
    for route in (None, latent):
        kernel = AutoencoderHMC(
            StanModel(logistic_program, data), m, 0.05, 5, exact=False, latent_density=route
        )
        rng = np.random.default_rng(3)
        state = kernel.init(m.decode(np.zeros(LATENT)))
        for _ in range(20):
            state, _ = kernel.step(state, rng)
        positions.append(state.position)
    np.testing.assert_allclose(positions[0], positions[1], rtol=1e-6, atol=1e-8)


def test_decoder_data_refuses_other_architectures():
    deep = maps("tanh")
    deep.decoder = DenseNetwork(deep.decoder.layers + [DenseLayer(np.eye(K + 1), np.zeros(K + 1), "tanh")])
    with pytest.raises(ValueError, match="linear decoder or one tanh hidden layer"):
        decoder_data(deep)
