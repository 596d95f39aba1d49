"""A trained encoder or decoder as plain NumPy: forward pass, J^T v and Jacobian.

Samplers call the decoder once per leapfrog step, where a TensorFlow call
would cost more than the arithmetic (a few small matrix products). So the
trained Keras layers are exported as weight matrices and evaluated here. The
only layers the autoencoders use are dense layers with a linear or tanh
activation, so this stays small; the tests check it against TensorFlow's own
gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ACTIVATIONS = ("linear", "tanh")


@dataclass
class DenseLayer:
    """``activation(weights @ x + bias)``; weights are (out, in)."""

    weights: np.ndarray
    bias: np.ndarray
    activation: str = "linear"

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r} not supported; have {ACTIVATIONS}")
        self.weights = np.asarray(self.weights, dtype=float)
        self.bias = np.asarray(self.bias, dtype=float)


class DenseNetwork:
    """A stack of dense layers, evaluated on one point (1-D) or a batch (rows)."""

    def __init__(self, layers: list[DenseLayer]):
        if not layers:
            raise ValueError("a network needs at least one layer")
        self.layers = layers
        self.input_dim = layers[0].weights.shape[1]
        self.output_dim = layers[-1].weights.shape[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        for layer in self.layers:
            x = x @ layer.weights.T + layer.bias
            if layer.activation == "tanh":
                x = np.tanh(x)
        return x

    def _forward(self, x: np.ndarray) -> list[np.ndarray]:
        """Each layer's output at one point (the derivative of tanh needs them)."""
        outputs = []
        for layer in self.layers:
            x = layer.weights @ x + layer.bias
            if layer.activation == "tanh":
                x = np.tanh(x)
            outputs.append(x)
        return outputs

    def value_and_vjp(self, x: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The output at ``x`` and ``J(x)^T v``, J the network's Jacobian at x."""
        outputs = self._forward(np.asarray(x, dtype=float))
        g = np.asarray(v, dtype=float)
        for layer, out in zip(reversed(self.layers), reversed(outputs), strict=True):
            if layer.activation == "tanh":
                g = g * (1.0 - out**2)
            g = layer.weights.T @ g
        return outputs[-1], g

    def vjp(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``J(x)^T v``: the gradient of ``v . network(x)`` with respect to x."""
        return self.value_and_vjp(x, v)[1]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """The (output_dim, input_dim) Jacobian at one point."""
        outputs = self._forward(np.asarray(x, dtype=float))
        J = np.eye(self.input_dim)
        for layer, out in zip(self.layers, outputs, strict=True):
            J = layer.weights @ J
            if layer.activation == "tanh":
                J = (1.0 - out**2)[:, None] * J
        return J

    @property
    def is_linear(self) -> bool:
        return all(layer.activation == "linear" for layer in self.layers)


class LatentMaps:
    """Encoder and decoder between the unconstrained space and the latent space.

    The autoencoder works on standardised draws, ``x = (q - mean) / scale``;
    these maps include the standardisation, so ``encode`` takes and
    ``decode`` returns points on the unconstrained scale of the Stan model.

    Parameters
    ----------
    encoder, decoder : DenseNetwork
    mean, scale : ndarray (dim,)
        The standardisation of the training draws.

    Attributes
    ----------
    latent_mean, latent_cov : ndarray or None
        Mean and covariance of the training draws' codes, when known.
    """

    def __init__(self, encoder: DenseNetwork, decoder: DenseNetwork, mean: np.ndarray, scale: np.ndarray):
        self.encoder = encoder
        self.decoder = decoder
        self.mean = np.asarray(mean, dtype=float)
        self.scale = np.asarray(scale, dtype=float)
        self.dim = self.mean.shape[0]
        self.latent_dim = decoder.input_dim
        if encoder.input_dim != self.dim or decoder.output_dim != self.dim:
            raise ValueError(
                f"encoder takes {encoder.input_dim} and decoder gives {decoder.output_dim} coordinates, "
                f"but the standardisation has {self.dim}"
            )
        self.latent_mean: np.ndarray | None = None
        self.latent_cov: np.ndarray | None = None
        if encoder.output_dim != self.latent_dim:
            raise ValueError(
                f"encoder gives {encoder.output_dim} latent coordinates, decoder takes {self.latent_dim}"
            )

    def encode(self, q: np.ndarray) -> np.ndarray:
        return self.encoder((np.asarray(q, dtype=float) - self.mean) / self.scale)

    def decode(self, z: np.ndarray) -> np.ndarray:
        return self.mean + self.scale * self.decoder(np.asarray(z, dtype=float))

    def decode_vjp(self, z: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``decode(z)`` and ``J^T v``, J the (dim, latent_dim) Jacobian of ``decode`` at z."""
        x, g = self.decoder.value_and_vjp(z, self.scale * np.asarray(v, dtype=float))
        return self.mean + self.scale * x, g

    def encode_vjp(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``encode(q)`` and ``J^T v``, J the (latent_dim, dim) Jacobian of ``encode`` at q."""
        z, g = self.encoder.value_and_vjp((np.asarray(q, dtype=float) - self.mean) / self.scale, v)
        return z, g / self.scale

    def decode_jacobian(self, z: np.ndarray) -> np.ndarray:
        """The (dim, latent_dim) Jacobian of ``decode`` at z."""
        return self.scale[:, None] * self.decoder.jacobian(z)

    def encode_jacobian(self, q: np.ndarray) -> np.ndarray:
        """The (latent_dim, dim) Jacobian of ``encode`` at q."""
        return self.encoder.jacobian((np.asarray(q, dtype=float) - self.mean) / self.scale) / self.scale
