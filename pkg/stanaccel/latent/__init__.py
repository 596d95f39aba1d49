"""Latent-space samplers (Deep MCMC): an autoencoder trained on Stan draws, HMC and pCN in its latent space.

See :mod:`stanaccel.latent.autoencoder` (training, saving), :mod:`stanaccel.latent.network`
(the NumPy export used inside samplers) and :mod:`stanaccel.latent.samplers` (AE-HMC, AE-pCN).
"""

from stanaccel.latent.autoencoder import (
    ARCHITECTURES,
    Autoencoder,
    TrainingReport,
    check_draws,
    default_latent_dim,
)
from stanaccel.latent.network import DenseLayer, DenseNetwork, LatentMaps

__all__ = [
    "ARCHITECTURES",
    "Autoencoder",
    "DenseLayer",
    "DenseNetwork",
    "LatentMaps",
    "TrainingReport",
    "check_draws",
    "default_latent_dim",
]
