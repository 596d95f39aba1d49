"""Figures of a report, drawn with matplotlib's Agg renderer and returned as PNG data URIs.

A report is one HTML file that must open anywhere without a network, so
every figure is embedded in it as ``data:image/png;base64,...``. Figures are
made as ``matplotlib.figure.Figure`` objects, never through pyplot, so that
drawing a report neither changes the user's matplotlib backend nor leaves
figures open. Every ArviZ plot of stanaccel is here.
"""

from __future__ import annotations

import base64
import io
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from stanaccel.diagnostics._arviz import az, numpy_path
from stanaccel.names import stan_names

MAX_PLOTTED = 6  # parameters (scalars) in trace and rank plots: keeps the page a few MB
DPI = 96
LOG_SPAN = 30
"""Ratio of the largest to the smallest bar of ESS per second above which the bars' axis is
logarithmic: on a linear axis from 0 the smallest bar would be a few pixels wide."""


def data_uri(figure: Figure) -> str:
    """The figure as a PNG data URI."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def png_file_uri(path: str | Path) -> str:
    """A PNG file (a study's plot) as a data URI."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def plotted_coords(idata: az.InferenceData, limit: int = MAX_PLOTTED) -> tuple[az.InferenceData, list[str]]:
    """The posterior's first ``limit`` scalars as a flat InferenceData, and their names.

    A vector parameter ``theta`` of length 30 would make 30 rows of trace
    plots; the report draws the first scalars only and says which.
    """
    names, arrays = [], {}
    for name, array in idata.posterior.data_vars.items():
        values = array.values.reshape(array.shape[0], array.shape[1], -1)
        labels = stan_names(name, array.shape[2:])  # b[1], as the summary names it
        for i in range(values.shape[2]):
            if len(names) == limit:
                break
            label = labels[i]
            names.append(label)
            arrays[label] = values[:, :, i]
    return az.from_dict(posterior=arrays), names


def trace_figure(idata: az.InferenceData) -> Figure:
    """ArviZ's trace plot (densities by chain, and draws) of the first scalars."""
    flat, names = plotted_coords(idata)
    figure = Figure(figsize=(9, 1.5 * len(names) + 0.4), layout="constrained")
    axes = figure.subplots(len(names), 2, squeeze=False)
    with _quiet_arviz():
        az.plot_trace(flat, var_names=names, axes=axes, compact=False, show=False)
    for row in axes:
        for ax in row:
            ax.title.set_fontsize(9)
            ax.tick_params(labelsize=7)
    return figure


def rank_figure(idata: az.InferenceData) -> Figure:
    """ArviZ's rank plot (per-chain histograms of rank-normalised draws) of the first scalars."""
    flat, names = plotted_coords(idata)
    columns = min(3, len(names))
    rows = -(-len(names) // columns)
    figure = Figure(figsize=(9, 2.1 * rows + 0.3), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    with _quiet_arviz():
        az.plot_rank(flat, var_names=names, ax=axes[: len(names)], show=False)
    for ax in axes[: len(names)]:
        ax.title.set_fontsize(9)
        ax.xaxis.label.set_fontsize(8)
        ax.yaxis.label.set_fontsize(8)
        ax.tick_params(labelsize=7)
    return figure


def convergence_figure(traces: list[dict]) -> Figure:
    """Worst bulk ESS and worst R-hat on growing prefixes of the draws, against wall time.

    ``traces`` holds one dict per sampler: ``label``, ``seconds``, ``ess_bulk_min``
    and ``rhat_max`` (lists of equal length), from
    :func:`stanaccel.diagnostics.prefixes.convergence_by_prefix`.
    """
    figure = Figure(figsize=(9, 3.2), layout="constrained")
    ess_ax, rhat_ax = figure.subplots(1, 2)
    for trace in traces:
        style = "--" if trace.get("reference") else "-"
        ess_ax.plot(trace["seconds"], trace["ess_bulk_min"], style, marker="o", ms=3, label=trace["label"])
        rhat_ax.plot(trace["seconds"], trace["rhat_max"], style, marker="o", ms=3, label=trace["label"])
    ess_ax.set_xlabel("wall time (s)")
    ess_ax.set_ylabel("bulk ESS (worst parameter)")
    rhat_ax.set_xlabel("wall time (s)")
    rhat_ax.set_ylabel("R-hat (worst parameter)")
    rhat_ax.axhline(1.01, color="grey", lw=0.8, ls=":")
    seconds = [t for trace in traces for t in trace["seconds"] if t > 0]
    wide = bool(seconds) and max(seconds) > 10 * min(seconds)  # a log axis only across decades
    for ax in (ess_ax, rhat_ax):
        if wide:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(labelsize=7)
    ess_ax.set_yscale("log")
    ess_ax.legend(fontsize=7)
    return figure


def ess_per_second_figure(rows: list[dict]) -> Figure:
    """Bars of ESS per second with the charged time and without, Stan NUTS marked."""
    y = np.arange(len(rows))
    figure = Figure(figsize=(9, 0.42 * len(rows) + 1.2), layout="constrained")
    ax = figure.subplots()
    ax.barh(
        y - 0.2, [r["ess_per_second"] for r in rows], height=0.4, label="warm-up, training, tuning charged"
    )
    ax.barh(y + 0.2, [r["ess_per_second_sampling"] for r in rows], height=0.4, label="sampling only")
    for r in rows:
        if r["is_nuts"]:
            ax.axvline(r["ess_per_second"], color="k", lw=0.8, ls="--", label=f"Stan NUTS ({r['step']})")
    labels = [
        f"{r['step']}: {r['sampler']}" + ("" if r.get("converged", True) else " (NOT CONVERGED: unreliable)")
        for r in rows
    ]
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ess_axis(ax, [r[key] for r in rows for key in ("ess_per_second", "ess_per_second_sampling")])
    ax.set_xlabel("bulk ESS per second (worst parameter)")
    figure.legend(fontsize=7, loc="outside lower center", ncols=4)  # not over bars that fill the axis
    return figure


def ess_axis(ax, values) -> None:
    """The x axis of bars of ESS (per second): from 0 to a little past the largest bar.

    Autoscaling is no good here: on a log axis the bars' base, 0, is dropped, and
    the axis spans the bars' ends only, so bars of nearly equal values fill a
    window of a few thousandths (17.795 to 17.825) and look different. The axis
    is linear from 0 unless the bars span more than :data:`LOG_SPAN` (then it is
    logarithmic over whole decades, the bars rising from its left end), NaN,
    infinite and non-positive values left out of the range.
    """
    finite = np.asarray([v for v in values if v is not None], dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.size == 0:
        ax.set_xlim(0, 1)
        return
    low, high = float(finite.min()), float(finite.max())
    if high > LOG_SPAN * low:
        ax.set_xscale("log")
        ax.set_xlim(10 ** np.floor(np.log10(low)), 10 ** np.ceil(np.log10(high * 1.05)))
    else:
        ax.set_xlim(0, high * 1.08)


@contextmanager
def _quiet_arviz():
    """ArviZ 0.2x's plots call a matplotlib helper that matplotlib 3.11 deprecates; nothing to act on here.

    The plots' statistics run on ArviZ's NumPy path, as the metrics do (see ``_arviz``).
    """
    with warnings.catch_warnings(), numpy_path():
        warnings.filterwarnings("ignore", message="Passing a dict or None as alias_mapping")
        yield
