"""The autoencoder of the latent-space samplers, trained with Keras on Stan draws.

Deep MCMC (Shahbaba et al.) trains an autoencoder on the draws of a short
Stan NUTS run (its warm-up, about 10% of a full run) and samples in its latent
space. Two architectures, chosen by name:

- ``"linear"``: the paper's three dense layers with linear activations
  (input, latent, output), the latent dimension about a tenth of the input;
- ``"tanh"``: one tanh hidden layer on each side (the paper's decoder
  ``D2 tanh(D1 z + b1)`` plus an output bias), for curved posteriors.

Draws are standardised per coordinate before training; the standardisation
is part of the model (saved with it, applied by :class:`LatentMaps`).
Training stops early on the reconstruction error of held-out draws.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from stanaccel.extras import import_keras
from stanaccel.latent.network import DenseLayer, DenseNetwork, LatentMaps

ARCHITECTURES = ("linear", "tanh")
MIN_DRAWS = 20
DTYPE = "float64"  # so the NumPy export and TensorFlow agree to rounding, not to float32


@dataclass
class TrainingReport:
    """What training did and how well the autoencoder reconstructs.

    Attributes
    ----------
    epochs : int
        Epochs run (early stopping keeps the best epoch's weights).
    train_loss, validation_loss : list of float
        Mean squared reconstruction error per epoch, on the standardised scale.
    n_train, n_validation : int
    seconds : float
    """

    epochs: int
    train_loss: list[float] = field(default_factory=list)
    validation_loss: list[float] = field(default_factory=list)
    n_train: int = 0
    n_validation: int = 0
    seconds: float = 0.0


def check_draws(draws: np.ndarray, latent_dim: int | None = None) -> np.ndarray:
    """Training draws as a finite (n, dim) array, or a clear error naming the problem."""
    draws = np.asarray(draws, dtype=float)
    if draws.ndim == 3:  # (chains, draws, dim)
        draws = draws.reshape(-1, draws.shape[-1])
    if draws.ndim != 2:
        raise ValueError(
            f"training draws must be (draws, dim) or (chains, draws, dim), not shape {draws.shape}"
        )
    n, dim = draws.shape
    bad_rows = np.flatnonzero(~np.all(np.isfinite(draws), axis=1))
    if bad_rows.size:
        raise ValueError(
            f"{bad_rows.size} training draws hold NaN or infinite values (first at row {bad_rows[0]}); "
            "drop them before training the autoencoder"
        )
    if n < MIN_DRAWS:
        raise ValueError(f"only {n} training draws; the autoencoder needs at least {MIN_DRAWS}")
    if dim < 2:
        raise ValueError("an autoencoder needs at least 2 coordinates to reduce")
    constant = np.flatnonzero(np.std(draws, axis=0) <= 1e-12 * np.maximum(1.0, np.abs(draws).max(axis=0)))
    if constant.size:
        raise ValueError(
            f"coordinates {constant.tolist()} are constant across the {n} training draws, so they cannot be "
            "standardised; a parameter that never moved means warm-up did not explore it"
        )
    if latent_dim is not None and not 1 <= latent_dim < dim:
        raise ValueError(
            f"latent_dim must be between 1 and {dim - 1} (the input has {dim}), not {latent_dim}"
        )
    return draws


def default_latent_dim(dim: int) -> int:
    """The paper's choice: about a tenth of the input dimension, at least 1."""
    return max(1, round(dim / 10))


class Autoencoder:
    """A trained encoder and decoder with the standardisation of their training draws.

    Build one with :meth:`fit` or :meth:`load`; use :meth:`maps` in samplers.

    Attributes
    ----------
    encoder, decoder : keras.Model
    mean, scale : ndarray (dim,)
        The standardisation of the training draws.
    architecture : str
    report : TrainingReport
    latent_mean, latent_cov : ndarray
        Mean and covariance of the training draws' latent codes (the
        latent samplers' default Gaussian reference and auxiliary scale).
    """

    def __init__(self, encoder, decoder, mean, scale, architecture: str, report: TrainingReport,
                 latent_mean=None, latent_cov=None):  # fmt: skip
        self.encoder = encoder
        self.decoder = decoder
        self.mean = np.asarray(mean, dtype=float)
        self.scale = np.asarray(scale, dtype=float)
        self.architecture = architecture
        self.report = report
        self.latent_mean = None if latent_mean is None else np.asarray(latent_mean, dtype=float)
        self.latent_cov = None if latent_cov is None else np.atleast_2d(np.asarray(latent_cov, dtype=float))

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    @property
    def latent_dim(self) -> int:
        return int(self.decoder.inputs[0].shape[-1])

    @classmethod
    def fit(
        cls,
        draws: np.ndarray,
        *,
        latent_dim: int | None = None,
        architecture: str = "linear",
        hidden: int | None = None,
        validation_fraction: float = 0.2,
        epochs: int = 1000,
        patience: int = 30,
        min_delta: float = 1e-4,
        batch_size: int = 64,
        learning_rate: float = 1e-2,
        seed: int = 0,
    ) -> Autoencoder:
        """Train on draws (n, dim) or (chains, n, dim) of the unconstrained parameters.

        Parameters
        ----------
        latent_dim : int, optional
            Default: about a tenth of dim (the paper's choice).
        architecture : "linear" or "tanh"
        hidden : int, optional
            Width of the tanh hidden layers; default ``max(2 * latent_dim, 8)`` capped at dim.
        validation_fraction : float
            Share of the draws held out for early stopping.
        patience, min_delta
            Training stops after ``patience`` epochs without the held-out error
            (mean squared error of standardised draws) falling by ``min_delta``.
        seed : int
            Seeds the split, the initial weights and the batch order.
        """
        import time

        if architecture not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {architecture!r}; have {ARCHITECTURES}")
        draws = check_draws(draws, latent_dim)
        n, dim = draws.shape
        latent_dim = latent_dim or default_latent_dim(dim)
        hidden = min(dim, hidden or max(2 * latent_dim, 8))
        if not 0 < validation_fraction < 1:
            raise ValueError(f"validation_fraction must be in (0, 1), not {validation_fraction}")
        tf, keras = _tensorflow_and_keras()
        keras.utils.set_random_seed(seed)
        mean, scale = draws.mean(axis=0), draws.std(axis=0)
        x = (draws - mean) / scale
        order = np.random.default_rng(seed).permutation(n)
        n_val = max(1, int(round(validation_fraction * n)))
        x_val, x_train = x[order[:n_val]], x[order[n_val:]]

        encoder, decoder = _build(keras, architecture, dim, latent_dim, hidden)
        inputs = keras.Input((dim,))
        model = keras.Model(inputs, decoder(encoder(inputs)))
        # One epoch is one call into TensorFlow (steps_per_execution), from one input pipeline kept
        # across epochs (a repeated dataset and steps_per_epoch). Keras's fit on arrays built a new
        # pipeline every epoch and called TensorFlow once per batch: on warm-up-sized draws that cost
        # three to five times the training. XLA is Keras's choice (jit_compile "auto": off on a CPU,
        # where it took 2-3 s to compile each fit and ran these small networks no faster).
        steps = -(-len(x_train) // batch_size)
        model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="mse", steps_per_execution=steps)
        validation = _held_out_error(tf, keras, model, x_val)
        stop = keras.callbacks.EarlyStopping(
            monitor="val_loss", patience=patience, min_delta=min_delta, restore_best_weights=True
        )
        batches = (
            tf.data.Dataset.from_tensor_slices((x_train, x_train))
            .shuffle(len(x_train), seed=seed, reshuffle_each_iteration=True)
            .batch(batch_size)
            .repeat()
        )
        start = time.perf_counter()
        history = model.fit(
            batches,
            epochs=epochs,
            steps_per_epoch=steps,
            shuffle=False,
            callbacks=[validation, stop],
            verbose=0,
        )
        report = TrainingReport(
            epochs=len(history.history["loss"]),
            train_loss=[float(v) for v in history.history["loss"]],
            validation_loss=validation.losses,
            n_train=len(x_train),
            n_validation=n_val,
            seconds=time.perf_counter() - start,
        )
        autoencoder = cls(encoder, decoder, mean, scale, architecture, report)
        codes = autoencoder.encode(draws)
        autoencoder.latent_mean = codes.mean(axis=0)
        autoencoder.latent_cov = np.atleast_2d(np.cov(codes, rowvar=False))
        return autoencoder

    def encode(self, q: np.ndarray) -> np.ndarray:
        """Latent codes of points (n, dim) on the unconstrained scale, by TensorFlow."""
        x = (np.atleast_2d(q) - self.mean) / self.scale
        return np.asarray(self.encoder(x, training=False), dtype=float)

    def decode(self, z: np.ndarray) -> np.ndarray:
        """Points on the unconstrained scale from latent codes (n, latent_dim), by TensorFlow."""
        x = np.asarray(self.decoder(np.atleast_2d(np.asarray(z, dtype=float)), training=False), dtype=float)
        return self.mean + self.scale * x

    def reconstruction(self, draws: np.ndarray) -> dict[str, float | list[float]]:
        """How well draws are reconstructed: errors on the standardised scale.

        Returns ``rmse`` (over all coordinates), ``rmse_per_coordinate``,
        ``explained_variance`` (1 - error variance / variance, pooled) and
        ``worst_coordinate``.
        """
        draws = np.asarray(draws, dtype=float).reshape(-1, self.dim)
        x = (draws - self.mean) / self.scale
        error = x - (self.decode(self.encode(draws)) - self.mean) / self.scale
        per = np.sqrt(np.mean(error**2, axis=0))
        return {
            "rmse": float(np.sqrt(np.mean(error**2))),
            "rmse_per_coordinate": per.tolist(),
            "explained_variance": float(1 - np.sum(error.var(axis=0)) / np.sum(x.var(axis=0))),
            "worst_coordinate": int(np.argmax(per)),
        }

    def maps(self) -> LatentMaps:
        """The trained networks exported to NumPy, with the standardisation."""
        maps = LatentMaps(_numpy_network(self.encoder), _numpy_network(self.decoder), self.mean, self.scale)
        maps.latent_mean, maps.latent_cov = self.latent_mean, self.latent_cov
        return maps

    def save(self, folder: str | Path) -> Path:
        """Write ``encoder.keras``, ``decoder.keras`` and ``autoencoder.json`` (standardisation, report)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.encoder.save(folder / "encoder.keras")
        self.decoder.save(folder / "decoder.keras")
        meta = {
            "architecture": self.architecture,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "latent_mean": None if self.latent_mean is None else self.latent_mean.tolist(),
            "latent_cov": None if self.latent_cov is None else self.latent_cov.tolist(),
            "report": self.report.__dict__,
        }
        (folder / "autoencoder.json").write_text(json.dumps(meta, indent=1))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> Autoencoder:
        """Read an autoencoder written by :meth:`save`."""
        folder = Path(folder)
        meta_path = folder / "autoencoder.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"no saved autoencoder in {folder} (missing autoencoder.json)")
        meta = json.loads(meta_path.read_text())
        keras = _keras()
        encoder = keras.models.load_model(folder / "encoder.keras")
        decoder = keras.models.load_model(folder / "decoder.keras")
        report = TrainingReport(**meta["report"])
        return cls(encoder, decoder, meta["mean"], meta["scale"], meta["architecture"], report,
                   meta.get("latent_mean"), meta.get("latent_cov"))  # fmt: skip


def _held_out_error(tf, keras, model, x_val):
    """A Keras callback that puts the held-out draws' mean squared reconstruction error in ``val_loss``.

    One compiled call an epoch, where Keras's own validation (``validation_data``)
    builds a new input pipeline every epoch: on warm-up-sized data that took
    as long as the training itself. It must come before ``EarlyStopping`` in
    the callback list, which reads it; ``losses`` keeps every epoch's.
    """
    held_out = tf.constant(x_val)
    error = tf.function(lambda: tf.reduce_mean(tf.square(model(held_out, training=False) - held_out)))

    class HeldOutError(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.losses: list[float] = []

        def on_epoch_end(self, epoch, logs=None):
            self.losses.append(float(error()))
            logs["val_loss"] = self.losses[-1]

    return HeldOutError()


def _tensorflow_and_keras():
    return import_keras("the autoencoder of the latent methods")


def _keras():
    return _tensorflow_and_keras()[1]


def _build(keras, architecture: str, dim: int, latent_dim: int, hidden: int):
    layers = keras.layers
    if architecture == "linear":
        encoder_layers = [layers.Dense(latent_dim, dtype=DTYPE)]
        decoder_layers = [layers.Dense(dim, dtype=DTYPE)]
    else:
        encoder_layers = [
            layers.Dense(hidden, activation="tanh", dtype=DTYPE),
            layers.Dense(latent_dim, dtype=DTYPE),
        ]
        decoder_layers = [
            layers.Dense(hidden, activation="tanh", dtype=DTYPE),
            layers.Dense(dim, dtype=DTYPE),
        ]
    encoder = keras.Sequential([keras.Input((dim,), dtype=DTYPE), *encoder_layers], name="encoder")
    decoder = keras.Sequential([keras.Input((latent_dim,), dtype=DTYPE), *decoder_layers], name="decoder")
    return encoder, decoder


def _numpy_network(model) -> DenseNetwork:
    layers = []
    for layer in model.layers:
        kernel, bias = (np.asarray(w, dtype=float) for w in layer.get_weights())
        activation = layer.get_config()["activation"]
        layers.append(DenseLayer(kernel.T, bias, activation))
    return DenseNetwork(layers)
