"""Workflows: TOML files whose steps run stanaccel's parts in order.

Only this package and ``stanaccel.cli`` put the parts together.
"""

from stanaccel.lazy import lazy_exports

_EXPORTS = {
    "Workflow": "stanaccel.workflow.runner",
    "WorkflowInterrupted": "stanaccel.workflow.interrupts",
    "load_workflow": "stanaccel.workflow.runner",
    "run_workflow": "stanaccel.workflow.runner",
}
"""Each name this package exports, and the module it comes from: imported on first use, so that
importing one of its modules (``stanaccel.workflow.cache``, whose warning pytest's settings name)
does not load the runner, and with it ArviZ, SciPy and Numba."""

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
