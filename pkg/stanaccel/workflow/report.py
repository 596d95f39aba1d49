"""The ``report`` step: the HTML report of the run so far (:mod:`stanaccel.diagnostics.report`).

Keys: ``file``, the page's name in the run's output folder (default
``report.html``). The page covers the steps before this one, as ``run.json``
records them when the step runs; a report step at the end of a workflow
covers the whole run.
"""

from __future__ import annotations

from typing import Any

from stanaccel.workflow.context import RunContext
from stanaccel.workflow.validation import PlainName, Table

SCHEMA = Table({"file": PlainName(".html", beside_steps=True)})


def report_step(step: dict[str, Any], context: RunContext, seed: int) -> dict[str, Any]:
    """Write the report of the steps so far into the run's output folder."""
    from stanaccel.diagnostics.report import report

    name = step.get("file", "report.html")
    if "/" in name or "\\" in name or not name.endswith(".html"):
        raise ValueError(f"step {step['name']!r}: file = {name!r}: expected a file name ending in .html")
    written = report(context.output, context.output / name)
    print(f"  report of {len(context.results)} steps -> {written.path}", flush=True)
    for line in written.left_out.values():
        print(f"  warning: {line}", flush=True)
    return {"report": written.path}
