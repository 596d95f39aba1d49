"""The latent Stan program route: the decoder's weights as data of a Stan program on the latent space.

The Deep MCMC paper extracted the trained decoder's weights and wrote the
latent potential in Stan, so that one Stan call gives ``log pi(decode(z))``
and its gradient. ``stan/logistic_latent.stan`` does this for logistic
regression; :func:`decoder_data` turns a trained decoder into its data.
The alternative route, the chain rule through the NumPy decoder around the
original program's gradient, needs no program per model (see
:class:`stanaccel.latent.samplers.AutoencoderHMC`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel.latent.network import LatentMaps


def decoder_data(maps: LatentMaps) -> dict[str, Any]:
    """Stan data for a decoder of one tanh hidden layer or one linear layer (with the standardisation)."""
    layers = maps.decoder.layers
    if len(layers) == 1 and layers[0].activation == "linear":
        d = maps.latent_dim
        first_w, first_b, tanh = np.eye(d), np.zeros(d), 0
        last = layers[0]
    elif len(layers) == 2 and layers[0].activation == "tanh" and layers[1].activation == "linear":
        first_w, first_b, tanh = layers[0].weights, layers[0].bias, 1
        last = layers[1]
    else:
        raise ValueError("the latent Stan program takes a linear decoder or one tanh hidden layer")
    return {
        "latent_dim": maps.latent_dim,
        "hidden": first_w.shape[0],
        "W1": first_w,
        "b1": first_b,
        "hidden_tanh": tanh,
        "W2": last.weights,
        "b2": last.bias,
        "location": maps.mean,
        "scale": maps.scale,
    }
