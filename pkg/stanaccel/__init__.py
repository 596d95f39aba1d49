"""stanaccel: faster, honest Bayesian sampling of expensive Stan posteriors.

Start with :class:`StanModel` (a compiled Stan program with data) and
:func:`sample_nuts` (Stan's own NUTS); ``stanaccel.diagnostics`` turns any
result into ArviZ InferenceData. Every result (a NUTS fit, a kernel run, a
GP density fit) is a :class:`Result`, with the same verbs: ``draws()``,
``summary()``, ``metrics()``, ``to_inference_data()`` and ``save(path)``.
"""

from stanaccel.results import Result
from stanaccel.stan import StanModel
from stanaccel.stan.nuts import sample_nuts

__version__ = "0.1.0"
__all__ = ["Result", "StanModel", "sample_nuts"]
