"""Latent training: the autoencoder of a latent method, trained on the warm-up draws.

:func:`train` fits it (:class:`stanaccel.latent.Autoencoder`, which needs the
``latent`` extra); :class:`Trained` holds it, so that a study's latent
samplers, or every trial of ``--tune``, share one training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stanaccel.sampling.warmup import Adaptation


@dataclass
class Trained:
    """An autoencoder trained once and shared by several latent samplers (a study's)."""

    maps: Any
    seconds: float
    report: dict[str, Any]
    autoencoder: Any = None


def train(config, adaptation: Adaptation, seed: int, say=None) -> Trained:
    """Train the autoencoder of ``config`` (architecture, latent_dim, epochs) on the warm-up draws."""
    from stanaccel.latent import Autoencoder

    say = say or (lambda line: None)
    say(f"training the autoencoder ({config.architecture}) on {len(adaptation.draws)} warm-up draws")
    autoencoder = Autoencoder.fit(
        adaptation.draws,
        latent_dim=config.latent_dim,
        architecture=config.architecture,
        epochs=config.epochs,
        seed=seed,
    )
    reconstruction = autoencoder.reconstruction(adaptation.draws)
    report = {
        "latent_dim": autoencoder.latent_dim,
        "architecture": autoencoder.architecture,
        "epochs": autoencoder.report.epochs,
        "training_seconds": autoencoder.report.seconds,
        "reconstruction": {k: v for k, v in reconstruction.items() if k != "rmse_per_coordinate"},
    }
    say(
        f"autoencoder: latent dimension {autoencoder.latent_dim}, {autoencoder.report.epochs} epochs in "
        f"{autoencoder.report.seconds:.1f} s"
    )
    return Trained(autoencoder.maps(), autoencoder.report.seconds, report, autoencoder)
