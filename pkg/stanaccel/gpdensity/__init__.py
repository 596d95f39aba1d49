"""The sigmoidal GP density model (Donner & Opper): the Polya-Gamma Gibbs sampler and the data of
its Stan baseline (``stan/gp_density.stan``), and the mean-field variational method with a sparse GP.
"""

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import SquaredExponential
from stanaccel.gpdensity.gibbs import GibbsSampler, GibbsState, inference_groups
from stanaccel.gpdensity.stan_baseline import stan_data
from stanaccel.gpdensity.variational import VariationalDensity, VariationalFit, VariationalWarning

__all__ = [
    "GaussianBase",
    "GibbsSampler",
    "GibbsState",
    "SquaredExponential",
    "VariationalDensity",
    "VariationalFit",
    "VariationalWarning",
    "inference_groups",
    "stan_data",
]
