"""What a workflow is, and what its steps share while it runs.

Kept apart from the runner so that the steps can name these types without
importing the runner that imports them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.executors import Executor, SerialExecutor
from stanaccel.programs import program_path


@dataclass
class Workflow:
    """A parsed workflow file."""

    name: str
    seed: int
    output: Path
    steps: list[dict[str, Any]]
    source: Path | None = None
    cache: bool = True
    executor: str | None = None


@dataclass
class RunContext:
    """What steps share: the workflow, its output folder, earlier steps' outputs, and the executor.

    ``executor`` (:mod:`stanaccel.executors`) runs the independent sampler
    runs of a study and the chains of a ``sample`` step; serial by default.
    """

    workflow: Workflow
    output: Path
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    progress: bool = True
    executor: Executor = field(default_factory=SerialExecutor)

    def step_seed(self, step: dict[str, Any]) -> int:
        """The step's own ``seed``, else one derived from the workflow seed and the step name."""
        if "seed" in step:
            return int(step["seed"])
        sequence = np.random.SeedSequence([self.workflow.seed, zlib.crc32(step["name"].encode())])
        return int(sequence.generate_state(1)[0])

    def result(self, step: dict[str, Any], key: str) -> dict[str, Any]:
        """The output of the earlier step named by ``step[key]``."""
        name = step.get(key)
        if name not in self.results:
            raise ValueError(
                f"step {step['name']!r}: {key} = {name!r} names no earlier step "
                f"(earlier steps: {list(self.results)})"
            )
        return self.results[name]

    def resolve_path(self, text: str) -> Path:
        """A path relative to the workflow file's folder, or to the working folder."""
        path = Path(text)
        if not path.is_absolute() and self.workflow.source is not None:
            beside = self.workflow.source.parent / path
            if beside.exists():
                return beside
        return path

    def checkpoints(self, step: dict[str, Any]) -> Path:
        """The step's checkpoint folder, ``<output>/<step name>/checkpoints`` (created here).

        A long step writes its chains' checkpoints there; ``stanaccel run`` on the
        same workflow after a Ctrl-C or a kill resumes the step from them.
        """
        folder = self.output / step["name"] / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        return folder


def program_file(program: str, context: RunContext) -> Path:
    """A bundled program by name, else a ``.stan`` path."""
    if program.endswith(".stan") or "/" in program:
        path = context.resolve_path(program)
        if not path.is_file():
            raise FileNotFoundError(f"Stan program file not found: {program}")
        return path
    return program_path(program)
