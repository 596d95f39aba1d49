"""Errors that more than one layer raises, or that the command line tells apart before it imports them.

:class:`ConfigError` is raised where sampler settings are checked
(:mod:`stanaccel.sampling.config`) and where a tuning space is read
(:mod:`stanaccel.tuning.space`); ``stanaccel.sampling.ConfigError`` is the same
class. :class:`OutputFailed` is raised where a run's files are written
(:mod:`stanaccel.diagnostics.files`), and the command line gives it its own
exit status without importing ArviZ. This module imports nothing else of stanaccel.
"""


class ConfigError(ValueError):
    """A sampler setting is unknown, of the wrong kind, out of range, or missing."""


class OutputFailed(OSError):
    """A run's output could be written nowhere: not at its path, nor in any rescue folder."""
