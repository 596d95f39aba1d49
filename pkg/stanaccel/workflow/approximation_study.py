"""Exact sampling with fast approximations on GP regression, against Stan NUTS.

An ``approximation_study`` step (Wang & Neal, "MCMC using fast approximations"):

1. generates gp_ard data (``data``: the generator's options);
2. runs Stan's NUTS on the exact posterior pi from dispersed starts
   (``chains`` of them; ``nuts``: warmup, draws). It is the baseline and
   the reference that every sampler's draws are checked against, by
   z-scores of posterior means and sds in units of their combined Monte
   Carlo standard error;
3. tunes the inner kernels cheaply: NUTS on an approximation (``tune``: an
   approximation; ``tune_warmup``, ``tune_draws``) gives the proposal
   covariance (of its draws), HMC's step size, and the samplers' starting
   points. Its time is charged to every sampler;
4. runs each sampler in ``samplers`` (``draws`` each, expanded over any
   ``sweep`` lists): ``method = "mh"`` or ``"hmc"`` on pi alone; ``"dc"``,
   the discretizing chain with ``approx``, ``inner``, ``inner_steps``,
   ``moves`` (r) and ``jump`` (s); ``"tt"``, tempered transitions over a
   ``ladder`` of approximations with ``inner_steps`` (k) transitions per
   level and direction. The inner kernel's ``mh_scale`` (default 2.38 /
   sqrt(dim)), or HMC's ``step_size`` (default: the tuning run's) and
   ``n_steps``, may be set. An approximation is ``{kind = "fitc" | "sor" |
   "subset", m, scale, inducing}`` (``scale``: a subset's weight scaled up
   to the full data's; ``inducing``: ``"landmarks"`` or ``"kmeans"``,
   :mod:`stanaccel.approx`).

It writes ``table.{md,csv,json}`` (one row per sampler: ESS per second with
and without the tuning charged, the ratio to NUTS, autocorrelation time,
R-hat, mark-move or TT acceptance, cache hits, pi and pi* evaluations and
seconds per iteration, the largest z-score against NUTS, and ``passes``:
that z-score below the Bonferroni limit for a family-wise 1e-3 and R-hat
below 1.1) and ``approximations.{md,csv,json}``
(each approximation's cost relative to pi and the spread of log pi - log pi*
over the NUTS draws), and ``ess_per_second.png`` (a bar per sampler).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.approx import ApproximationPair, KeepConstants, low_rank, subset_of_data
from stanaccel.datasets import generate
from stanaccel.diagnostics import convergence_metrics, reference_z_scores, to_inference_data
from stanaccel.kernels import (
    HMC,
    Cycle,
    DiscretizingChain,
    RandomWalkMetropolis,
    TemperedTransitions,
    approximation_ladder,
    run_chains,
)
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.nuts import sample_nuts
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    ListOf,
    Table,
    generator_options,
    one_of,
)

METHODS = ("mh", "hmc", "dc", "tt")
COLUMNS = ["sampler", "settings", "seconds", "ess_bulk_min", "ess_per_second", "ess_per_second_sampling",
           "vs_nuts", "vs_nuts_sampling", "autocorrelation_time", "rhat_max", "acceptance",
           "cache_hit_fraction", "exact_per_iteration", "approx_per_iteration", "exact_seconds_per_iteration",
           "approx_seconds_per_iteration", "z_max", "passes"]  # fmt: skip


APPROXIMATION = Table(
    {
        "kind": one_of("fitc", "sor", "subset"),
        "m": INTEGER,
        "scale": BOOLEAN,
        "inducing": one_of("landmarks", "kmeans"),
    },
    required=("m",),
)
SAMPLER_KEYS = {
    "method": one_of(*METHODS),
    "inner": one_of("mh", "hmc"),
    "mh_scale": NUMBER,
    "step_size": NUMBER,
    "n_steps": INTEGER,
    "inner_steps": INTEGER,
    "approx": APPROXIMATION,
    "moves": INTEGER,
    "jump": INTEGER,
    "ladder": ListOf(APPROXIMATION),
}
SWEEP = Table({key: ListOf(entry) for key, entry in SAMPLER_KEYS.items()})  # lists of a sampler's own values
SCHEMA = Table(
    {
        "data": Table(generator_options("gp_ard")),
        "chains": INTEGER,
        "draws": INTEGER,
        "nuts": Table({"warmup": INTEGER, "draws": INTEGER}),
        "tune": APPROXIMATION,
        "tune_warmup": INTEGER,
        "tune_draws": INTEGER,
        "samplers": ListOf(Table({**SAMPLER_KEYS, "sweep": SWEEP})),
    }
)


def make_approximation(spec: dict[str, Any], model: StanModel, data: dict[str, Any], seed: int):
    """A Stan instance of the approximation ``{kind, m, scale}``, wrapped to keep constants."""
    kind, m = spec.get("kind", "fitc"), int(spec["m"])
    if kind == "subset":
        return KeepConstants(subset_of_data(model, data, m, seed=seed, scale=spec.get("scale", True)))
    return KeepConstants(low_rank(data, m, kind=kind, seed=seed, method=spec.get("inducing", "landmarks")))


def approximation_label(spec: dict[str, Any]) -> str:
    return f"{spec.get('kind', 'fitc')} m={spec['m']}"


def expand(samplers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each sampler once per combination of the lists in its ``sweep`` table."""
    out = []
    for sampler in samplers:
        sweep = sampler.get("sweep", {})
        base = {k: v for k, v in sampler.items() if k != "sweep"}
        for values in itertools.product(*sweep.values()):
            spec = {**base, **dict(zip(sweep, values, strict=True))}
            if spec.get("method") not in METHODS:
                raise ValueError(f"unknown sampler method {spec.get('method')!r}; have {list(METHODS)}")
            out.append(spec)
    return out


class Tuning:
    """What the cheap NUTS run on an approximation gives the samplers."""

    def __init__(self, fit, seconds: float):
        draws = fit.draws_unconstrained.reshape(-1, fit.draws_unconstrained.shape[-1])
        self.covariance = np.cov(draws, rowvar=False)
        self.step_size = float(np.median(fit.step_size))
        self.starts = fit.draws_unconstrained[:, -1]
        self.seconds = seconds


def build_kernel(spec: dict[str, Any], exact, approximations: dict, tuning: Tuning):
    """One chain's kernel from a sampler spec and that chain's densities."""
    dim = exact.dim
    mh_scale = float(spec.get("mh_scale", 2.38 / np.sqrt(dim)))

    def inner(density, kind=None):
        kind = kind or spec.get("inner", "mh")
        if kind == "mh":
            kernel = RandomWalkMetropolis(density, scale=mh_scale, covariance=tuning.covariance)
        else:
            step = float(spec.get("step_size", tuning.step_size))
            kernel = HMC(density, step, int(spec.get("n_steps", 5)), inv_metric=tuning.covariance)
        steps = int(spec.get("inner_steps", 1))
        return kernel if steps == 1 else Cycle([kernel] * steps)

    method = spec["method"]
    if method in ("mh", "hmc"):
        return inner(exact, method)
    if method == "dc":
        approx = approximations[approximation_label(spec["approx"])]
        moves, jump = int(spec.get("moves", 1)), int(spec.get("jump", 1))
        return DiscretizingChain(exact, inner(approx), moves=moves, jump=jump)
    ladder = approximation_ladder(exact, [approximations[approximation_label(a)] for a in spec["ladder"]])
    return TemperedTransitions(ladder, lambda density, level: inner(density))


def describe(spec: dict[str, Any]) -> tuple[str, str]:
    """(sampler label, settings) for the table."""
    method = spec["method"]
    inner = spec.get("inner", "mh").upper()
    steps = f"k={spec.get('inner_steps', 1)}"
    if method in ("mh", "hmc"):
        return f"{method.upper()} on pi", steps
    if method == "dc":
        settings = f"{approximation_label(spec['approx'])}, r={spec.get('moves', 1)}, s={spec.get('jump', 1)}"
        return f"DC ({inner})", settings + (f", {steps}" if spec.get("inner_steps", 1) != 1 else "")
    levels = " > ".join(approximation_label(a) for a in spec["ladder"])
    return f"TT ({inner})", f"n={len(spec['ladder'])}: {levels}, {steps}"


def approximation_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    data = generate("gp_ard", seed=seed, **step.get("data", {})).data
    model = StanModel(compile_program(program_path("gp_ard")), data)
    samplers = expand(step.get("samplers", []))
    chains = int(step.get("chains", 2))
    draws = int(step.get("draws", 500))
    specs = {
        approximation_label(a): a for s in samplers for a in [s.get("approx"), *s.get("ladder", [])] if a
    }
    tune_spec = step.get("tune", {"kind": "fitc", "m": 50})
    specs.setdefault(approximation_label(tune_spec), tune_spec)
    starts = np.random.default_rng([seed, 1]).uniform(-2, 2, size=(chains, model.dim))

    nuts = {"warmup": 500, "draws": 500, **step.get("nuts", {})}
    print(f"  Stan NUTS on pi ({nuts['warmup']} + {nuts['draws']} per chain)", flush=True)
    start = time.perf_counter()
    fit = sample_nuts(model, chains=chains, warmup=nuts["warmup"], draws=nuts["draws"], inits=starts,
                      seed=seed % 2**32, progress=context.progress)  # fmt: skip
    nuts_seconds = time.perf_counter() - start
    reference = to_inference_data({"posterior": {"theta": fit.draws_unconstrained}})
    warmup_share = fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1)
    nuts_metrics = convergence_metrics(
        reference, wall_seconds=nuts_seconds, sampling_seconds=nuts_seconds * (1 - warmup_share)
    )
    nuts_row = {
        "sampler": "Stan NUTS on pi",
        "settings": f"{nuts['warmup']} warm-up + {nuts['draws']} draws",
        "seconds": nuts_seconds,
        "ess_bulk_min": nuts_metrics["ess_bulk_min"],
        "ess_per_second": nuts_metrics["ess_per_second"],
        "ess_per_second_sampling": nuts_metrics["ess_per_second_sampling"],
        "vs_nuts": 1.0,
        "vs_nuts_sampling": 1.0,
        "autocorrelation_time": chains * nuts["draws"] / nuts_metrics["ess_bulk_min"],
        "rhat_max": nuts_metrics["rhat_max"],
        "exact_per_iteration": fit.gradient_evaluations / (chains * (nuts["warmup"] + nuts["draws"])),
    }
    rows = [nuts_row]

    approx_rows = []
    reference_points = fit.draws_unconstrained.reshape(-1, model.dim)
    sample = reference_points[np.random.default_rng(seed).choice(len(reference_points), 20, replace=False)]
    for label, spec in specs.items():
        pair = ApproximationPair(
            KeepConstants(model.with_data(data)), make_approximation(spec, model, data, seed)
        )
        approx_rows.append({"approximation": label, **pair.cost(sample[:5]), **pair.discrepancy(sample)})
    print(write_table(folder, "approximations", approx_rows, list(approx_rows[0])))

    tune_model = make_approximation(tune_spec, model, data, seed).model
    print(f"  tuning: Stan NUTS on {approximation_label(tune_spec)}", flush=True)
    start = time.perf_counter()
    tune_fit = sample_nuts(tune_model, chains=chains, warmup=int(step.get("tune_warmup", 300)),
                           draws=int(step.get("tune_draws", 200)), inits=starts, seed=seed % 2**32 + 1,
                           progress=False)  # fmt: skip
    tuning = Tuning(tune_fit, time.perf_counter() - start)
    limit = float(norm.ppf(1 - 1e-3 / (2 * 2 * model.dim)))

    for k, spec in enumerate(samplers):
        name, settings = describe(spec)
        print(f"  {name}: {settings}", flush=True)
        per_chain: list[dict] = []

        def factory(chain: int, spec=spec, per_chain=per_chain):
            own_exact = KeepConstants(model.with_data(data))
            used = [a for a in [spec.get("approx"), *spec.get("ladder", [])] if a]
            own = {approximation_label(a): make_approximation(a, model, data, seed) for a in used}
            per_chain.append({"exact": own_exact, "approx": list(own.values()), "labels": list(own)})
            return build_kernel(spec, own_exact, own, tuning)

        run = run_chains(factory, tuning.starts, draws, seed=seed + k, name=name)
        rows.append(_row(run, spec, name, settings, per_chain, tuning, nuts_row, reference, draws, limit))
    table = write_table(folder, "table", rows, COLUMNS)
    plot_ess_per_second(rows, folder / "ess_per_second.png")
    print(table)
    return {"rows": rows, "approximations": approx_rows, "reference": reference}


def _row(run, spec, name, settings, per_chain, tuning, nuts_row, reference, draws, limit) -> dict:
    idata = to_inference_data({"posterior": {"theta": run.positions}})
    metrics = convergence_metrics(
        idata, wall_seconds=run.wall_seconds + tuning.seconds, sampling_seconds=run.wall_seconds
    )
    iterations = run.positions.shape[0] * run.positions.shape[1]
    exact_evals = sum(_evaluations(d["exact"]) for d in per_chain)
    approx_evals = sum(_evaluations(a) for d in per_chain for a in d["approx"])
    summaries = [s for s in run.summaries if s]
    acceptance = float(np.mean(run.acceptance_probability))
    cache = ""
    if spec["method"] == "dc":
        acceptance = float(np.mean([s["move_acceptance"] for s in summaries]))
        hits = sum(s["cache_hits"] for s in summaries)
        cache = hits / max(hits + sum(s["exact_evaluations"] for s in summaries), 1)
    elif spec["method"] == "tt":
        acceptance = float(np.mean([s["tt_acceptance"] for s in summaries]))
    z_scores = np.abs(reference_z_scores(idata, reference))
    z_max = float(np.max(z_scores)) if np.all(np.isfinite(z_scores)) else float("inf")
    return {
        "sampler": name,
        "settings": settings,
        "seconds": run.wall_seconds + tuning.seconds,
        "tuning_seconds": tuning.seconds,
        "ess_bulk_min": metrics["ess_bulk_min"],
        "ess_per_second": metrics["ess_per_second"],
        "ess_per_second_sampling": metrics["ess_per_second_sampling"],
        "vs_nuts": metrics["ess_per_second"] / nuts_row["ess_per_second"],
        "vs_nuts_sampling": metrics["ess_per_second_sampling"] / nuts_row["ess_per_second_sampling"],
        "autocorrelation_time": iterations / metrics["ess_bulk_min"],
        "rhat_max": metrics["rhat_max"],
        "acceptance": acceptance,
        "cache_hit_fraction": cache,
        "exact_per_iteration": exact_evals / iterations,
        "approx_per_iteration": approx_evals / iterations,
        "exact_seconds_per_iteration": sum(d["exact"].seconds for d in per_chain) / iterations,
        "approx_seconds_per_iteration": sum(a.seconds for d in per_chain for a in d["approx"]) / iterations,
        "z_max": z_max,
        "passes": bool(z_max < limit and not metrics["rhat_max"] >= 1.1),
        "per_approximation": {
            label: {
                "evaluations_per_iteration": sum(_evaluations(d["approx"][i]) for d in per_chain)
                / iterations,
                "seconds_per_iteration": sum(d["approx"][i].seconds for d in per_chain) / iterations,
            }
            for i, label in enumerate(per_chain[0]["labels"])
        },
        "spec": spec,
    }


def plot_ess_per_second(rows: list[dict], path) -> None:
    """Bars of ESS per second (tuning or warm-up charged, and sampling only), NUTS marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['sampler']}: {r['settings']}" for r in rows]
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    ax.barh(y + 0.2, [r["ess_per_second"] for r in rows], height=0.4, label="tuning / warm-up charged")
    ax.barh(y - 0.2, [r["ess_per_second_sampling"] for r in rows], height=0.4, label="sampling only")
    ax.axvline(rows[0]["ess_per_second"], color="k", lw=0.8, ls="--", label="Stan NUTS")
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("bulk ESS per second (worst parameter)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _evaluations(density) -> int:
    return density.n_log_density + density.n_gradient
