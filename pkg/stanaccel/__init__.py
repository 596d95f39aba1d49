"""stanaccel: faster, honest Bayesian sampling of expensive Stan posteriors."""

__version__ = "0.1.0"
