"""Every stanaccel sampler on any Stan program: one configuration, one engine.

- :mod:`~stanaccel.sampling.methods`: the table of methods, one record each, which everything reads;
- :mod:`~stanaccel.sampling.config`: typed settings per method, checked, with one precedence rule;
- :mod:`~stanaccel.sampling.program`: what a method needs of the program (``beta``, observations,
  approximations with the same parameters);
- :mod:`~stanaccel.sampling.build`: the one kernel factory;
- :mod:`~stanaccel.sampling.engine`: :func:`sample`, the entry point: checks, then warm-up to draws;
- :mod:`~stanaccel.sampling.warmup`: the NUTS warm-up (or an earlier one), its pilot, and the
  :class:`~stanaccel.sampling.warmup.Adaptation` it gives the kernels;
- :mod:`~stanaccel.sampling.training`: the autoencoder of a latent method;
- :mod:`~stanaccel.sampling.run`: :func:`~stanaccel.sampling.run.run_sampler`, one sampler from a
  warm-up's adaptation to its draws (step tuning, the chains, latent NUTS);
- :mod:`~stanaccel.sampling.result`: :class:`SampleResult` and the files it writes;
- :mod:`~stanaccel.sampling.chains`, :mod:`~stanaccel.sampling.tasks`: a chain, or a study's sampler
  run, as a task for an executor.
- :mod:`~stanaccel.sampling.batches`: a chain's batch of log densities evaluated across an
  executor's workers.
"""

from stanaccel.observations import Observations
from stanaccel.sampling.config import Approximation, ConfigError, SamplerConfig, keys, make_config
from stanaccel.sampling.engine import sample
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.program import ApproximationWarning, ProgramConventionError
from stanaccel.sampling.result import SampleResult, method_label

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
