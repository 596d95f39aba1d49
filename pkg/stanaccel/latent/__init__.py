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
from stanaccel.latent.samplers import APPROXIMATE_NOTE, AutoencoderHMC, AutoencoderPCN, tune_step
from stanaccel.latent.stan_route import decoder_data

__all__ = [
    "APPROXIMATE_NOTE",
    "ARCHITECTURES",
    "AutoencoderHMC",
    "AutoencoderPCN",
    "Autoencoder",
    "DenseLayer",
    "DenseNetwork",
    "LatentMaps",
    "TrainingReport",
    "check_draws",
    "decoder_data",
    "default_latent_dim",
    "tune_step",
]
