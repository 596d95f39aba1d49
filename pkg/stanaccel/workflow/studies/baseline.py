"""What the Stan-program studies share: NUTS baseline, reference and pilot, and the adapted step size.

A study on a Stan program runs Stan's NUTS up to three times before its
samplers: the **baseline** (the table's NUTS row), a **reference** (a longer
run the samplers' draws are checked against; the baseline itself where the
study sets none) and a **pilot** (a run whose adaptation and draws tune the
samplers: their step size, metric, starts, and the draws an autoencoder is
trained on), each with its own seed. :func:`nuts_runs` runs them in that
order; :func:`adapted_step` is the rule by which a NUTS run's adaptation
becomes the samplers' step size and metric, and :func:`pilot_tuning` makes
the samplers' :class:`~stanaccel.sampling.warmup.Adaptation` from a pilot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stanaccel.sampling.warmup import Adaptation
from stanaccel.stan.nuts import NutsFit, sample_nuts


@dataclass(frozen=True)
class Run:
    """One NUTS run of a study: what the log calls it, its lengths and seed.

    ``model`` is another model than the study's (the pilot of the
    approximation study runs on an approximation); ``progress`` False keeps
    the run's progress bar off even when the workflow shows bars.
    """

    what: str
    warmup: int
    draws: int
    seed: int
    model: Any = None
    progress: bool = True


@dataclass(frozen=True)
class NutsRuns:
    """The fits of :func:`nuts_runs`: the baseline, the reference (the baseline if none) and the pilot."""

    baseline: NutsFit
    reference: NutsFit
    pilot: NutsFit | None


def nuts_runs(
    model,
    chains: int,
    baseline: Run,
    reference: Run | None = None,
    pilot: Run | None = None,
    *,
    inits: np.ndarray | None = None,
    progress: bool = False,
) -> NutsRuns:
    """Run Stan's NUTS for the baseline, then the reference, then the pilot (each if given).

    Every run has ``chains`` chains from ``inits`` (None: Stan's random
    inits) and shows a progress bar when ``progress`` and its own
    ``progress`` say so.
    """
    fits = []
    for run in (baseline, reference, pilot):
        if run is None:
            fits.append(None)
            continue
        print(f"  {run.what} ({run.warmup} + {run.draws} per chain)", flush=True)
        fits.append(
            sample_nuts(
                model if run.model is None else run.model,
                chains=chains,
                warmup=run.warmup,
                draws=run.draws,
                inits=inits,
                seed=run.seed,
                progress=progress and run.progress,
            )
        )
    return NutsRuns(fits[0], fits[1] or fits[0], fits[2])


def adapted_step(fit) -> tuple[float, np.ndarray]:
    """The samplers' step size and inverse metric from a NUTS adaptation: the medians' rule.

    The median over chains of the adapted step size, and the mean over
    chains of the adapted inverse metric. ``fit`` is a
    :class:`~stanaccel.stan.nuts.NutsFit` or anything with per-chain
    ``step_size`` and ``inv_metric``.
    """
    return float(np.median(fit.step_size)), np.mean(fit.inv_metric, axis=0)


def pilot_tuning(fit: NutsFit, draws: np.ndarray, inv_metric: np.ndarray | None = None) -> Adaptation:
    """The samplers' tuning from a pilot run: its adapted step (:func:`adapted_step`), ends and time.

    The samplers start where the pilot's chains ended, are charged its wall
    time, and keep ``draws`` (an autoencoder's training draws, or a
    reference Gaussian's); ``inv_metric`` replaces the adapted one (the
    covariance of the draws, say).
    """
    step_size, adapted_metric = adapted_step(fit)
    metric = adapted_metric if inv_metric is None else inv_metric
    return Adaptation(step_size, metric, fit.draws_unconstrained[:, -1], draws, fit.wall_seconds)
