"""Diagnostics: ArviZ glue, ESS per second, reference comparisons.

Every ArviZ call in stanaccel lives in this package. It reads draws and
knows no sampler.
"""

from stanaccel.diagnostics.inference_data import to_inference_data
from stanaccel.diagnostics.metrics import (
    autocorrelation,
    bulk_ess,
    convergence_metrics,
    convergence_warnings,
    mcse_z_scores,
    method_statistics,
    method_warnings,
    reference_z_scores,
    summary,
    worst_bulk_ess,
    worst_ess,
    worst_rhat,
)

__all__ = [
    "autocorrelation",
    "bulk_ess",
    "convergence_metrics",
    "convergence_warnings",
    "mcse_z_scores",
    "method_statistics",
    "method_warnings",
    "reference_z_scores",
    "summary",
    "to_inference_data",
    "worst_bulk_ess",
    "worst_ess",
    "worst_rhat",
]
