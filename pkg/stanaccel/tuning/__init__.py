"""Bayesian optimisation for adaptive MCMC (Mahendran, Wang, Hamze and de Freitas, AISTATS 2012).

Two stages. In the adaptation stage, Bayesian optimisation
(:func:`bayesian_optimisation`) tunes a sampler's settings over a
:class:`Space` to maximise an objective measured on a short chain (the
paper's is :func:`autocorrelation_objective`; also :func:`ess_per_second`
and :func:`ess_per_gradient`). In the sampling stage, a
:class:`RandomisedPolicy` drawn from the Gaussian process's predictions
fixes a mixture kernel over the policy's settings
(:meth:`RandomisedPolicy.mixture`). That kernel is exact when each
component is, because the component is drawn independently of the state,
and the final chain does not adapt: the adaptation's chains are discarded.
:func:`random_search` is the baseline.
"""

from stanaccel.tuning.bayesopt import Trial, TuningResult, bayesian_optimisation, random_search
from stanaccel.tuning.objectives import autocorrelation_objective, ess_per_gradient, ess_per_second
from stanaccel.tuning.policy import RandomisedPolicy, policy_probabilities
from stanaccel.tuning.space import Categorical, Integer, Real, Space

__all__ = [
    "Categorical",
    "Integer",
    "RandomisedPolicy",
    "Real",
    "Space",
    "Trial",
    "TuningResult",
    "autocorrelation_objective",
    "bayesian_optimisation",
    "ess_per_gradient",
    "ess_per_second",
    "policy_probabilities",
    "random_search",
]
