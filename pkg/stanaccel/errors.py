"""Errors of the user's settings that more than one layer raises.

:class:`ConfigError` is raised where sampler settings are checked
(:mod:`stanaccel.sampling.config`) and where a tuning space is read
(:mod:`stanaccel.tuning.space`); ``stanaccel.sampling.ConfigError`` is the same
class. This module imports nothing else of stanaccel.
"""


class ConfigError(ValueError):
    """A sampler setting is unknown, of the wrong kind, out of range, or missing."""
