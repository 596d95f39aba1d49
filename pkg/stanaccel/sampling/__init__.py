"""Every stanaccel sampler on any Stan program: one configuration, one engine.

- :mod:`~stanaccel.sampling.methods`: the table of methods, one record each, which everything reads;
- :mod:`~stanaccel.sampling.config`: typed settings per method, checked, with one precedence rule;
- :mod:`~stanaccel.sampling.program`: what a method needs of the program (``beta``, observations,
  approximations with the same parameters);
- :mod:`~stanaccel.sampling.build`: the one kernel factory;
- :mod:`~stanaccel.sampling.engine`: :func:`sample`, warm-up to draws, and :class:`SampleResult`;
- :mod:`~stanaccel.sampling.tasks`: a chain, or a study's sampler run, as a task for an executor.
"""

from stanaccel.observations import Observations
from stanaccel.sampling.config import Approximation, ConfigError, SamplerConfig, keys, make_config
from stanaccel.sampling.engine import SampleResult, method_label, sample
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.program import ApproximationWarning, ProgramConventionError

__all__ = [
    "METHODS",
    "Approximation",
    "ApproximationWarning",
    "ConfigError",
    "MethodSpec",
    "Observations",
    "ProgramConventionError",
    "SampleResult",
    "SamplerConfig",
    "keys",
    "make_config",
    "method_label",
    "sample",
]
