"""The GP density model: Gibbs sampler, variational method and Stan baseline against a known truth.

A ``density_study`` step:

1. draws nested data sets of each size in ``sizes`` from the synthetic
   density ``target`` (``bimodal_1d`` or ``mixture_2d``; the first N points of
   the largest set), and ``test_points`` fresh points for the test
   log-likelihood;
2. fits, at each size, the base Gaussian alone (the baseline every method
   must beat) and each configured method: ``gibbs`` (``iterations``,
   ``warmup``, ``hyper_every``, ``density_every``), ``variational``
   (``n_inducing``, ``quadrature``, ``iterations``, ``learning_rate``) and
   ``stan`` (``n_inducing``, ``n_normaliser``, ``chains``, ``warmup``,
   ``draws``); each takes ``max_n``, the largest size it is run at;
3. scores the posterior mean density: the test log-likelihood per point, the
   Hellinger and L2 distances to the truth on a grid (``grid`` points per
   axis), its mass on that grid (1 if it is normalised: a density that
   integrates to more than 1 gets a test log-likelihood it has not earned),
   the share of the grid's truth inside the 90% band, and the wall time.

It writes ``table.{md,csv,json}``, ``growth.md`` (the slope b of
log seconds = a + b log N per method: the empirical order of the runtime),
``runtime.png``, ``elbo.png`` (the variational bound per point at each
iteration), one ``density_N<size>.png`` per size (the truth, the base
measure, each method's posterior mean with its 90% band in 1-D; contours in
2-D) and ``densities_N<size>.npz`` (the grid, truth, means and bands).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.extras import require_latent
from stanaccel.gpdensity import GaussianBase, GibbsSampler, VariationalDensity
from stanaccel.gpdensity.stan_baseline import fit_stan_baseline
from stanaccel.gpdensity.synthetic import Mixture, distances, target
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import INTEGER, ListOf, Table, keys_of, one_of

METHODS = ("gibbs", "variational", "stan")
STUDY_TARGETS = ("bimodal_1d", "mixture_2d")  # the plots are 1-D curves or 2-D contours
LABELS = {"base": "base Gaussian", "gibbs": "Gibbs (Alg. 1)", "variational": "variational (Alg. 2)",
          "stan": "Stan NUTS baseline"}  # fmt: skip
KINDS = {"base": "", "gibbs": "exact MCMC", "variational": "**approximate** (mean field, sparse GP)",
         "stan": "NUTS on an **approximate** model (sparse g, MC normaliser)"}  # fmt: skip
COLUMNS = ["method", "N", "kind", "seconds", "test_loglik", "hellinger", "l2", "mass", "band_coverage",
           "details"]  # fmt: skip
# Each method's table: the study's own keys, then the options it passes on to the method.
SCHEMA = Table(
    {
        "target": one_of(*STUDY_TARGETS),
        "sizes": ListOf(INTEGER),
        "test_points": INTEGER,
        "grid": INTEGER,
        "gibbs": Table(
            {
                "iterations": INTEGER,
                "warmup": INTEGER,
                "density_every": INTEGER,
                "max_n": INTEGER,
                **keys_of(GibbsSampler),
            }
        ),
        "variational": Table(
            {"iterations": INTEGER, "max_n": INTEGER, **keys_of(VariationalDensity, skip=("seed",))}
        ),
        "stan": Table({"max_n": INTEGER, **keys_of(fit_stan_baseline, skip=("seed", "progress"))}),
    }
)


def density_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables and plots."""
    if "variational" in step:
        require_latent(f"step {step['name']!r}: the variational method")
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    truth = target(step.get("target", "bimodal_1d"))
    sizes = sorted(int(n) for n in step.get("sizes", [100, 300, 1000]))
    rng = np.random.default_rng(seed)
    pool = truth.sample(sizes[-1], rng)
    test = truth.sample(int(step.get("test_points", 2000)), rng)
    grid, cell = truth.grid(int(step.get("grid", 300 if truth.dim == 1 else 40)))
    at = np.vstack([grid, test])
    truth_loglik = float(np.mean(truth.logpdf(test)))
    print(f"  {step.get('target', 'bimodal_1d')}: sizes {sizes}, test log-likelihood of the truth "
          f"{truth_loglik:.4f} per point", flush=True)  # fmt: skip
    rows, elbo_traces = [], {}
    for n in sizes:
        data = pool[:n]
        base = GaussianBase.fit(data)
        base_density = np.exp(base.logpdf(at))
        curves = {"base": (base_density[: len(grid)], None, None)}
        rows.append(_row("base", n, 0.0, base_density[None], len(grid), truth, grid, cell, test, ""))
        base_hellinger = rows[-1]["hellinger"]
        for method in METHODS:
            options = dict(step.get(method, {}) or {})
            if method not in step or n > int(options.pop("max_n", sizes[-1])):
                continue
            print(f"  N={n}: {LABELS[method]}", flush=True)
            draws, seconds, details, trace = FITS[method](data, at, options, seed, context.progress)
            if trace is not None:
                elbo_traces[n] = trace
            row = _row(method, n, seconds, draws, len(grid), truth, grid, cell, test,
                       details)  # fmt: skip
            rows.append(row)
            grid_draws = draws[:, : len(grid)]
            curves[method] = (grid_draws.mean(0), *np.quantile(grid_draws, [0.05, 0.95], axis=0))
            print(f"    {seconds:.1f} s, test log-lik {row['test_loglik']:.4f}, Hellinger "
                  f"{row['hellinger']:.3f} (base {base_hellinger:.3f})", flush=True)  # fmt: skip
        _save_curves(folder / f"densities_N{n}.npz", grid, truth, curves)
        plot_densities(folder / f"density_N{n}.png", truth, grid, curves, data, n)
    for row in rows:
        row["truth_loglik"] = truth_loglik
    table = write_table(folder, "table", rows, COLUMNS)
    growth = runtime_growth(rows)
    (folder / "growth.md").write_text(growth + "\n")
    plot_runtime(folder / "runtime.png", rows)
    if elbo_traces:
        plot_elbo(folder / "elbo.png", elbo_traces)
    print(table)
    print(growth)
    return {"rows": rows, "folder": folder}


def _fit_gibbs(data, at, options, seed, progress):
    iterations = int(options.pop("iterations", 300))
    warmup = int(options.pop("warmup", 200))
    every = int(options.pop("density_every", 2))
    sampler = GibbsSampler(data, **options)
    start = time.perf_counter()
    run = sampler.run(iterations, warmup=warmup, seed=seed, at=at, density_every=every, progress=progress)
    seconds = time.perf_counter() - start
    details = (f"{warmup}+{iterations} its, M mean {np.mean(run['n_events']):.0f}, "
               f"kernel acc {run['acceptance']['kernel']:.2f}")  # fmt: skip
    return run["density"], seconds, details, None


def _fit_variational(data, at, options, seed, progress):
    iterations = int(options.pop("iterations", 500))
    start = time.perf_counter()
    fit = VariationalDensity(data, seed=seed, **options).fit(iterations, progress=progress)
    seconds = time.perf_counter() - start
    draws = fit.density_draws(at, 400, np.random.default_rng(seed))
    rises = np.diff(fit.elbo)
    details = (f"{fit.iterations} its, ELBO/N {fit.elbo[-1] / len(data):.4f}, "
               f"largest ELBO dip {max(0.0, -rises.min()) if len(rises) else 0:.2g}, "
               f"mass check {fit.mass:.3f}")  # fmt: skip
    if fit.stopped:
        details += f", STOPPED: {fit.stopped}"
    return draws, seconds, details, np.asarray(fit.elbo)


def _fit_stan(data, at, options, seed, progress):
    fit = fit_stan_baseline(data, at=at, seed=seed, progress=progress, **options)
    draws = fit["density"].reshape(-1, fit["density"].shape[-1])
    details = (f"L={fit['stan_data']['L']}, divergences {fit['divergences']}, "
               f"step {fit['step_size']:.2g}")  # fmt: skip
    return draws, fit["wall_seconds"], details, None


FITS = {"gibbs": _fit_gibbs, "variational": _fit_variational, "stan": _fit_stan}


def _row(method, n, seconds, draws, n_grid, truth: Mixture, grid, cell, test, details) -> dict:
    mean = draws.mean(axis=0)
    scores = distances(truth, mean[:n_grid], grid, cell)
    if len(draws) > 1:
        low, high = np.quantile(draws[:, :n_grid], [0.05, 0.95], axis=0)
        true = np.exp(truth.logpdf(grid))
        coverage = float(np.sum(true * ((true >= low) & (true <= high))) / np.sum(true))
    else:
        coverage = float("nan")
    return {
        "method": LABELS[method],
        "N": n,
        "kind": KINDS[method],
        "seconds": float(seconds),
        "test_loglik": float(np.mean(np.log(mean[n_grid:]))),
        **scores,
        "mass": float(np.sum(mean[:n_grid]) * cell),
        "band_coverage": coverage,
        "details": details,
    }


def runtime_growth(rows: list[dict]) -> str:
    """The slope of log seconds against log N for each method run at two or more sizes."""
    lines = ["| method | sizes | seconds | slope of log s vs log N |", "|---|---|---|---|"]
    for method in METHODS:
        mine = [r for r in rows if r["method"] == LABELS[method]]
        if len(mine) < 2:
            continue
        n = np.array([r["N"] for r in mine], dtype=float)
        s = np.array([r["seconds"] for r in mine])
        slope = np.polyfit(np.log(n), np.log(s), 1)[0]
        lines.append(f"| {LABELS[method]} | {', '.join(str(int(v)) for v in n)} | "
                     f"{', '.join(f'{v:.3g}' for v in s)} | {slope:.2f} |")  # fmt: skip
    return "\n".join(lines)


def _save_curves(path: Path, grid, truth, curves) -> None:
    arrays = {"grid": grid, "truth": np.exp(truth.logpdf(grid))}
    for name, (mean, low, high) in curves.items():
        arrays[f"{name}_mean"] = mean
        if low is not None:
            arrays[f"{name}_q05"], arrays[f"{name}_q95"] = low, high
    np.savez_compressed(path, **arrays)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_densities(path: Path, truth: Mixture, grid, curves, data, n) -> None:
    """1-D: truth, base and each method's mean with its 90% band. 2-D: contour panels."""
    plt = _pyplot()
    true = np.exp(truth.logpdf(grid))
    if truth.dim == 1:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        x = grid[:, 0]
        ax.plot(x, true, "k", lw=2, label="truth")
        for name, (mean, low, high) in curves.items():
            style = "--" if name == "base" else "-"
            (line,) = ax.plot(x, mean, style, lw=1.3, label=LABELS[name])
            if low is not None:
                ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
        ax.plot(data[:, 0], np.zeros(len(data)), "|", color="0.4", ms=6)
        ax.set_xlabel("x")
        ax.set_ylabel("density")
        ax.set_title(f"N = {n}: posterior mean and 90% band")
        ax.legend(fontsize=8)
    else:
        side = int(round(np.sqrt(len(grid))))
        X, Y = grid[:, 0].reshape(side, side), grid[:, 1].reshape(side, side)
        panels = [("truth", true)] + [(LABELS[k], v[0]) for k, v in curves.items()]
        fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.4), sharey=True)
        levels = np.linspace(0, true.max(), 9)[1:]
        for ax, (title, values) in zip(axes, panels, strict=True):
            ax.contour(X, Y, values.reshape(side, side), levels=levels)
            ax.plot(data[:, 0], data[:, 1], ".", color="0.5", ms=1.5)
            ax.set_title(title, fontsize=9)
        fig.suptitle(f"N = {n}: posterior mean density (truth's contour levels)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_elbo(path: Path, traces: dict[int, np.ndarray]) -> None:
    """The variational bound per data point at each iteration, one line per N."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for n, trace in traces.items():
        ax.plot(np.arange(1, len(trace) + 1), trace / n, label=f"N = {n}")
    ax.set_xscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("ELBO / N")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_runtime(path: Path, rows: list[dict]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for method in METHODS:
        mine = [r for r in rows if r["method"] == LABELS[method]]
        if mine:
            ax.loglog([r["N"] for r in mine], [r["seconds"] for r in mine], "o-", label=LABELS[method])
    ax.set_xlabel("N (observations)")
    ax.set_ylabel("wall seconds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
