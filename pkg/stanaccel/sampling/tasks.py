"""A study's sampler run as a task an executor runs elsewhere (:func:`run_sampler_task`).

The task function lives in the package (a Dask worker or a spawned process
imports it by name) and takes one picklable :class:`SamplerTask`; what it
holds is rebuilt where it runs (:mod:`stanaccel.sampling.chains`). Its
draws are written to the executor's ``scratch`` folder, when it has one,
and read back by :func:`run_samplers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from stanaccel.kernels import KernelRun
from stanaccel.sampling.chains import restore, spill
from stanaccel.sampling.run import run_sampler


@dataclass
class SamplerTask:
    """One sampler run of a study: :func:`~stanaccel.sampling.run.run_sampler` with these arguments.

    The run's chains run in threads where the task runs; ``announce`` is
    printed first (where the task runs: a local cluster's workers print to
    the same terminal).
    """

    config: Any
    model: Any
    data: dict[str, Any]
    adaptation: Any
    seed: int
    scratch: str | None = None
    announce: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def run_sampler_task(task: SamplerTask):
    """Run one sampler of a study (see :class:`SamplerTask`); its draws spilled to ``scratch``."""
    if task.announce:
        print(task.announce, flush=True)
    result = run_sampler(task.config, task.model, task.data, task.adaptation, seed=task.seed, **task.options)
    if isinstance(result.run, KernelRun):
        result.run = spill(result.run, task.scratch)
    return result


def run_samplers(executor, tasks: list[SamplerTask]) -> list:
    """Each sampler task on ``executor``, in order; their results with the draws read back."""
    scratch = None if executor.scratch is None else str(executor.scratch)
    results = executor.map(run_sampler_task, [replace(t, scratch=scratch) for t in tasks])
    for result in results:
        result.run = restore(result.run)
    return results
