"""The sigmoidal GP density model (Donner & Opper): the Polya-Gamma Gibbs sampler and the data of
its Stan baseline (``stan/gp_density.stan``); the variational method is to come.
"""

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import SquaredExponential
from stanaccel.gpdensity.gibbs import GibbsSampler, GibbsState, inference_groups
from stanaccel.gpdensity.stan_baseline import stan_data

__all__ = [
    "GaussianBase",
    "GibbsSampler",
    "GibbsState",
    "SquaredExponential",
    "inference_groups",
    "stan_data",
]
