"""The actions a workflow step can take: one table that the runner, the checks and the CLI help read.

Each entry of :data:`ACTIONS` names the function that runs a step (it takes
the step's table, the run's :class:`~stanaccel.workflow.context.RunContext`
and the step's seed, and returns a dict that later steps read), the schema
of the keys the step may set besides ``name``, ``action`` and ``seed``
(:mod:`stanaccel.workflow.validation`), a line for ``stanaccel run
--help``, what a later step can take from it (``gives``: a data set, a Stan
NUTS warm-up), and the names of the files it writes in its folder
(``writes``: only such files are ever removed from there, see
:mod:`stanaccel.workflow.cache`). Adding an action is one function and one entry here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from stanaccel.workflow import report, sample, steps
from stanaccel.workflow.context import RunContext
from stanaccel.workflow.studies import approximation, density, ising, latent, pde, tempering
from stanaccel.workflow.validation import Table


def _nothing(step: dict[str, Any]) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True)
class Action:
    """One action: the function that runs a step, the keys the step may set, its help line, what a later
    step can take from it (:class:`~stanaccel.workflow.validation.Earlier`), and the names (``fnmatch``
    patterns) of the files it writes in its folder."""

    run: Callable[[dict[str, Any], RunContext, int], dict[str, Any]]
    schema: Table
    help: str
    gives: Callable[[dict[str, Any]], frozenset[str]] = _nothing
    writes: tuple[str, ...] = ()


SAMPLER_WRITES = ("posterior.nc", "metrics.json", "summary.txt", "statistics.json", "checkpoints/*")
STUDY_WRITES = ("*.csv", "*.md", "*.json", "*.png", "*.npz", "autoencoder/*")


ACTIONS: dict[str, Action] = {
    "generate": Action(
        steps.generate_step,
        steps.GENERATE_SCHEMA,
        "a synthetic data set for a bundled program (generator and its options); writes data.json and "
        "truth.json",
        gives=lambda step: frozenset({"data"}),
        writes=("data.json", "truth.json"),
    ),
    "nuts": Action(
        steps.nuts_step,
        steps.NUTS_SCHEMA,
        "Stan's NUTS on a program (program, data, chains, warmup, draws, ...); writes posterior.nc, "
        "metrics.json, summary.txt",
        gives=lambda step: frozenset({"warmup"}),
        writes=SAMPLER_WRITES,
    ),
    "sample": Action(
        sample.sample_step,
        sample.SCHEMA,
        "any stanaccel sampler on a program after Stan's NUTS warm-up (method and its settings)",
        gives=sample.gives,
        writes=SAMPLER_WRITES,
    ),
    "tempering_study": Action(
        tempering.tempering_study_step,
        tempering.SCHEMA,
        "tempering samplers side by side with Stan NUTS over data sizes",
        writes=STUDY_WRITES,
    ),
    "approximation_study": Action(
        approximation.approximation_study_step,
        approximation.SCHEMA,
        "exact samplers that move with fast approximations (discretizing chain, tempered transitions) "
        "against Stan NUTS on GP regression",
        writes=STUDY_WRITES,
    ),
    "latent_study": Action(
        latent.latent_study_step,
        latent.SCHEMA,
        "autoencoder latent-space samplers (AE-HMC, AE-pCN, latent NUTS) against Stan NUTS on logistic "
        "regression",
        writes=STUDY_WRITES,
    ),
    "pde_study": Action(
        pde.pde_study_step,
        pde.SCHEMA,
        "pCN, h-pCN, AE-pCN and the exact samplers over surrogates on the elliptic PDE inverse problem",
        writes=STUDY_WRITES,
    ),
    "ising_study": Action(
        ising.ising_study_step,
        ising.SCHEMA,
        "intracluster moves on a constrained Ising model tuned by Bayesian optimisation and random "
        "search, against the expert's settings and Kawasaki",
        writes=STUDY_WRITES,
    ),
    "density_study": Action(
        density.density_study_step,
        density.SCHEMA,
        "the GP density model's Gibbs sampler, variational method and Stan baseline against a known density",
        writes=STUDY_WRITES,
    ),
    "report": Action(
        report.report_step,
        report.SCHEMA,
        "one self-contained HTML page of the steps before it (file, default report.html)",
    ),
}
"""Every action a step may name; :mod:`stanaccel.workflow.studies` documents each study's keys."""


def actions_help(width: int = 100) -> str:
    """The actions and their help lines, for ``stanaccel run --help`` (lines of at most ``width``)."""
    column = max(map(len, ACTIONS)) + 4
    return "\n".join(
        textwrap.fill(
            action.help, width, initial_indent=f"  {name:<{column - 2}}", subsequent_indent=" " * column
        )
        for name, action in ACTIONS.items()
    )
