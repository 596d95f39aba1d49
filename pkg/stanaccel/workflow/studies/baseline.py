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

A study whose samplers take a cheap warm-up (their ``warmup`` setting
``"pathfinder"`` or ``"laplace"``, a :class:`StudyWarmup` in its schema) has
:func:`study_tuning` run one in place of the pilot: one per warm-up the
samplers ask for, shared by them and charged to each, as the pilot is.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stanaccel.sampling.config import WARMUPS
from stanaccel.sampling.methods import method_spec
from stanaccel.sampling.warmup import Adaptation, cheap_warm_up
from stanaccel.stan.nuts import NutsFit, sample_nuts
from stanaccel.workflow.sample import Setting


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


class StudyWarmup:
    """A study's ``warmup`` key (of the step, a sampler or a sweep): the warm-up that tunes its samplers.

    One of :data:`~stanaccel.sampling.config.WARMUPS`: ``"nuts"`` (the
    study's NUTS pilot) or a cheap warm-up, which each of ``methods`` must
    accept (their configuration checks it, as ``stanaccel sample`` does). A
    number is refused: the pilot's length is the study's own key.
    """

    def __init__(self, methods, length_key: str = "tune_warmup"):
        self.methods = tuple(methods)
        self.length_key = length_key

    def check(self, value: Any, key: str, where) -> None:
        if not isinstance(value, str) or value not in WARMUPS:
            close = difflib.get_close_matches(str(value), WARMUPS, n=1)
            raise where.error(
                f"{key} = {value!r}: expected one of {', '.join(map(repr, WARMUPS))}, the warm-up that tunes "
                f"the samplers (the NUTS pilot's iterations are {self.length_key})"
                + (f"; did you mean {close[0]!r}?" if close else "")
            )
        for method in self.methods:
            Setting(method).check(value, key, where)


def tuning_key(config) -> tuple[str, bool]:
    """Which samplers can share one warm-up: the same kind, and whether it adapts an HMC step for them.

    A cheap warm-up adapts a step size for a sampler that moves with one on
    the posterior and does not set it (:func:`~stanaccel.sampling.warmup.cheap_warm_up`).
    """
    step = method_spec(config.method).warmup_adapts_step(config) and "step_size" not in config.user_keys()
    return config.warmup_kind, config.cheap_warmup and step


def study_tuning(
    model, config, seed: int, pilot: Callable[[], Adaptation], say=print, progress: bool = False
) -> tuple[Adaptation, dict[str, float]]:
    """The samplers' tuning for ``config``'s warm-up, and the seconds to charge each sampler for it.

    ``"nuts"``: the study's NUTS pilot (``pilot()``, which runs it once).
    A cheap warm-up: a Gaussian fitted to ``model`` (the density the pilot
    runs on) by :func:`~stanaccel.sampling.warmup.cheap_warm_up`, its metric
    the covariance of its draws (the pilot's rule); when its diagnostics
    reject the Gaussian, the pilot's tuning, charged both (the
    :class:`~stanaccel.sampling.warmup.WarmupWarning` says so). The
    adaptation's ``warmup`` and ``report`` say which warm-up was used.
    """
    if not config.cheap_warmup:
        tuning = pilot()
        return tuning, {"warmup": tuning.seconds}
    charged: dict[str, float] = {}
    adaptation, report = cheap_warm_up(model, config, {"warmup": seed}, progress, say, charged)
    if adaptation is None:
        tuning = pilot()
        return replace(tuning, report=report), {**charged, "warmup": tuning.seconds}
    return replace(adaptation, inv_metric=np.cov(adaptation.draws, rowvar=False)), charged
