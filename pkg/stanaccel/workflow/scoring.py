"""The scoring every study shares: the Stan NUTS reference row, each sampler's row, the plot.

A study runs Stan's NUTS as its baseline, then samplers through
:func:`stanaccel.sampling.run.run_sampler`, and scores each the same way:

- ``seconds``: the time with the warm-up, pilot, training and tuning charged
  (``charged_seconds`` of those), ``sampling_seconds`` the sampling's
  alone (Stan NUTS's: less its warm-up's share); ``ess_per_second``
  divides ``ess_min``, the worst over the parameters of min(bulk ESS, tail
  ESS), by it, ``ess_per_second_sampling`` by the sampling time alone;
- ``vs_nuts``, ``vs_nuts_sampling``: those divided by Stan NUTS's (whose
  own sampling time leaves out its warm-up's share, estimated by the
  warm-up's share of its gradient evaluations);
- ``rhat_max``, ``converged`` (R-hat, ESS, divergences and tree depth by
  :func:`~stanaccel.diagnostics.convergence_warnings`), ``rhat_median``, ``acceptance``, ``evaluations``,
  ``evaluations_per_iteration``, ``autocorrelation_time`` (iterations per
  effective draw), ``ess_per_1000_evaluations``;
- against a ``reference`` run (InferenceData), ``z_max``: the largest
  difference of a posterior mean or sd from the reference's, in combined
  Monte Carlo standard errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel.diagnostics import convergence_metrics, reference_z_scores, to_inference_data
from stanaccel.sampling.methods import method_spec
from stanaccel.sampling.result import SampleResult, method_label
from stanaccel.sampling.warmup import warmup_share
from stanaccel.stan.nuts import NutsFit


def _row(
    idata,
    *,
    sampler: str,
    exact: bool,
    settings: str,
    seconds: float,
    sampling_seconds: float,
    evaluations: int,
    iterations: int,
    acceptance: float,
    nuts: dict | None,
    reference=None,
) -> dict:
    metrics = convergence_metrics(idata, wall_seconds=seconds, sampling_seconds=sampling_seconds)
    ess = metrics["ess_min"]
    row = {
        "sampler": sampler,
        "exact": bool(exact),
        "settings": settings,
        "seconds": seconds,
        "sampling_seconds": sampling_seconds,
        "ess_min": ess,
        "ess_bulk_min": metrics["ess_bulk_min"],
        "ess_tail_min": metrics["ess_tail_min"],
        "ess_per_second": metrics["ess_per_second"],
        "ess_per_second_sampling": metrics["ess_per_second_sampling"],
        "vs_nuts": 1.0 if nuts is None else metrics["ess_per_second"] / nuts["ess_per_second"],
        "vs_nuts_sampling": 1.0
        if nuts is None
        else metrics["ess_per_second_sampling"] / nuts["ess_per_second_sampling"],
        "rhat_max": metrics["rhat_max"],
        "converged": metrics["converged"],  # stanaccel.diagnostics.convergence_warnings' rule
        "rhat_median": float(np.median(list(metrics["rhat"].values()))),
        "acceptance": acceptance,
        "evaluations": int(evaluations),
        "evaluations_per_iteration": evaluations / max(iterations, 1),
        "ess_per_1000_evaluations": 1000 * ess / max(int(evaluations), 1),
        "autocorrelation_time": iterations / ess,
    }
    if reference is not None:
        z = np.abs(reference_z_scores(idata, reference))
        row["z_max"] = float(np.max(z)) if np.all(np.isfinite(z)) else float("inf")
    return row


def nuts_row(
    fit: NutsFit,
    *,
    seconds: float | None = None,
    settings: str = "",
    reference=None,
    sampler: str = "Stan NUTS",
) -> dict[str, Any]:
    """The reference row of Stan NUTS, timed with its warm-up (``seconds``, default the fit's wall time)."""
    seconds = fit.wall_seconds if seconds is None else seconds
    iterations = fit.chains * (fit.warmup_unconstrained.shape[1] + fit.num_draws)
    row = _row(
        fit.to_inference_data(),
        sampler=sampler,
        exact=True,
        settings=settings or f"{fit.warmup_unconstrained.shape[1]} warm-up + {fit.num_draws} draws",
        seconds=seconds,
        sampling_seconds=seconds * (1 - warmup_share(fit)),
        evaluations=fit.gradient_evaluations,
        iterations=iterations,
        acceptance=float(np.mean(fit.sample_stats["acceptance_rate"])),
        nuts=None,
        reference=reference,
    )
    row["autocorrelation_time"] = fit.chains * fit.num_draws / row["ess_min"]  # sampling draws only
    return row


def score_row(
    result: SampleResult, nuts: dict | None, *, settings: str = "", reference=None, sampler: str | None = None
) -> dict[str, Any]:
    """A sampler's row, its ratios to the ``nuts`` row (from :func:`nuts_row`)."""
    row = _row(
        result.to_inference_data(),
        sampler=sampler or method_label(result.config),
        exact=result.exact,
        settings=settings,
        seconds=result.wall_seconds,
        sampling_seconds=result.sampling_seconds,
        evaluations=result.evaluations,
        iterations=result.iterations,
        acceptance=result.acceptance,
        nuts=nuts,
        reference=reference,
    )
    row["charged_seconds"] = sum(result.charged_seconds.values())
    return row


def approximation_acceptance(result: SampleResult) -> float | None:
    """The acceptance that matters for a method over approximations: DC's mark moves, TT's trajectories.

    The mean over chains of the summary statistic its record names (``acceptance_key`` of
    :class:`~stanaccel.sampling.methods.MethodSpec`); None for other methods (their
    ``acceptance`` is their steps').
    """
    summaries = [s for s in result.reports.get("summaries", []) if s]
    key = method_spec(result.method).acceptance_key
    return float(np.mean([s[key] for s in summaries])) if key and summaries else None


def reference_idata(draws: np.ndarray):
    """InferenceData of unconstrained draws (chains, draws, dim), as a reference for z-scores."""
    return to_inference_data({"posterior": {"theta": draws}})


def plot_ess_per_second(rows: list[dict], path) -> None:
    """Bars of ESS per second (warm-up, pilot and training charged; sampling only), NUTS marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from stanaccel.diagnostics.figures import ess_axis

    labels = [f"{r['sampler']}: {r['settings']}" for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5), layout="constrained")
    ax.barh(
        y + 0.2, [r["ess_per_second"] for r in rows], height=0.4, label="warm-up, pilot, training charged"
    )
    ax.barh(y - 0.2, [r["ess_per_second_sampling"] for r in rows], height=0.4, label="sampling only")
    ax.axvline(rows[0]["ess_per_second"], color="k", lw=0.8, ls="--", label="Stan NUTS")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ess_axis(ax, [r[key] for r in rows for key in ("ess_per_second", "ess_per_second_sampling")])
    ax.set_xlabel("bulk ESS per second (worst parameter)")
    fig.legend(fontsize=7, loc="outside lower center", ncols=3)  # not over bars that fill the axis
    fig.savefig(path, dpi=120)
    plt.close(fig)
