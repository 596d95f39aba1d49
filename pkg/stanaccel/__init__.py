"""stanaccel: faster, honest Bayesian sampling of expensive Stan posteriors.

Start with :class:`StanModel` (a compiled Stan program with data) and
:func:`sample_nuts` (Stan's own NUTS); ``stanaccel.diagnostics`` turns any
result into ArviZ InferenceData. Every result (a NUTS fit, a kernel run, a
GP density fit) is a :class:`Result`, with the same verbs: ``draws()``,
``summary()``, ``metrics()``, ``to_inference_data()`` and ``save(path)``.
"""

from typing import TYPE_CHECKING

from stanaccel.lazy import lazy_exports

__version__ = "0.1.0"
__all__ = ["Result", "StanModel", "sample_nuts"]

if TYPE_CHECKING:
    from stanaccel.results import Result
    from stanaccel.stan import StanModel
    from stanaccel.stan.nuts import sample_nuts

_LAZY = {"Result": "stanaccel.results", "StanModel": "stanaccel.stan", "sample_nuts": "stanaccel.stan.nuts"}
"""``Result``, ``StanModel`` and ``sample_nuts``, imported on first use, so that importing a subpackage
(the command line among them) does not load NumPy, ArviZ and Stan before it needs to: ``stanaccel``
answers Ctrl-C in its first seconds with one line, not a traceback."""

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
