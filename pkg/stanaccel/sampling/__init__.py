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

# The table of methods, which every module here reads, is filled first (in a process worker too); the
# rest is imported on first use, so that the command line's help does not pay for ArviZ and SciPy.
from stanaccel.lazy import lazy_exports
from stanaccel.sampling import methods as _methods  # noqa: F401

_EXPORTS = {
    "METHODS": "stanaccel.sampling.methods",
    "Approximation": "stanaccel.sampling.config",
    "ApproximationWarning": "stanaccel.sampling.program",
    "ConfigError": "stanaccel.sampling.config",
    "MethodSpec": "stanaccel.sampling.methods",
    "Observations": "stanaccel.observations",
    "ProgramConventionError": "stanaccel.sampling.program",
    "SampleResult": "stanaccel.sampling.result",
    "SamplerConfig": "stanaccel.sampling.config",
    "keys": "stanaccel.sampling.config",
    "make_config": "stanaccel.sampling.config",
    "method_label": "stanaccel.sampling.result",
    "sample": "stanaccel.sampling.engine",
}
"""Each name this package exports, and the module it comes from: imported on first use, so that the
command line's ``--help`` and the table of methods do not pay for ArviZ, SciPy and the samplers."""

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
