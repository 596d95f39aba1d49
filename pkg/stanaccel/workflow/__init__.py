"""Workflows: TOML files whose steps run stanaccel's parts in order.

Only this package and ``stanaccel.cli`` put the parts together.
"""

from stanaccel.workflow.interrupts import WorkflowInterrupted
from stanaccel.workflow.runner import Workflow, load_workflow, run_workflow

__all__ = ["Workflow", "WorkflowInterrupted", "load_workflow", "run_workflow"]
