"""The sigmoidal GP density model (Donner & Opper): Polya-Gamma Gibbs sampler (and, to come, the
variational method and a Stan baseline).
"""

from stanaccel.gpdensity.base_measure import GaussianBase
from stanaccel.gpdensity.covariance import SquaredExponential
from stanaccel.gpdensity.gibbs import GibbsSampler, GibbsState, inference_groups

__all__ = ["GaussianBase", "GibbsSampler", "GibbsState", "SquaredExponential", "inference_groups"]
