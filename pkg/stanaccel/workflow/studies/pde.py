"""The elliptic PDE inverse problem: pCN, h-pCN, AE-pCN and exact samplers over Stan surrogates.

A ``pde_study`` step (the Deep MCMC paper's PDE experiment, with the
surrogate-driven exact samplers of "MCMC using fast approximations"):

1. builds the posterior (``posterior``: ``n``, ``degree``, ``regime``,
   ``prior``; :func:`stanaccel.pde.elliptic_posterior`, data seeded by the
   step's seed) and its warm-up, the Laplace approximation with ``warmup``
   Laplace draws per chain (:class:`stanaccel.sampling.pde_target.PDETarget`), whose
   time is charged to every sampler;
2. runs the ``reference`` sampler (a table of settings, by default h-pCN
   with long chains) for the exact reference the rows' bias is measured
   against: z-scores of the posterior means and sds of the log likelihood,
   the field's mean and the field at the 25 sensors in combined Monte Carlo
   standard errors;
3. measures each surrogate the samplers use: its cost relative to the exact
   posterior and the sd of log pi - log pi* at reference draws (which sets
   the exact samplers' acceptance), with and without the enhanced error model;
4. runs each sampler in ``samplers`` (the keys of ``stanaccel sample``,
   ``chains`` and ``draws`` from the step unless a sampler sets them)
   through :func:`stanaccel.sampling.run.run_sampler`, and scores it with
   :mod:`stanaccel.workflow.scoring`; ``vs_pcn`` divides its ESS per second
   by the first pCN row's.

It writes ``table.{md,csv,json}`` (one row per sampler: seconds with the
warm-up charged, acceptance, the smallest bulk ESS among the summaries, ESS
per second, ``vs_pcn``, the mean log likelihood, ``z_max`` against the
reference, R-hat (``acceptance`` of DC: its mark moves'; of TT: its
trajectories'), and ``passes``: z_max below the Bonferroni limit for a
family-wise 1e-3 and R-hat below 1.1), ``surrogates.{md,csv,json}`` and
``ess_per_second.png``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.approx import KeepConstants
from stanaccel.extras import require_latent
from stanaccel.pde import elliptic_posterior
from stanaccel.pde.benchmark import PRIORS
from stanaccel.pde.problem import NOISE_REGIMES
from stanaccel.sampling.config import Approximation, keys, make_config
from stanaccel.sampling.methods import method_spec, methods_in
from stanaccel.sampling.pde_target import PDETarget
from stanaccel.sampling.program import approximation, describe_approximation
from stanaccel.sampling.result import method_label
from stanaccel.sampling.run import SEEDS, run_sampler
from stanaccel.sampling.tasks import SamplerTask, run_samplers
from stanaccel.seeds import spawn_seed, spawn_seeds
from stanaccel.workflow.sample import Setting
from stanaccel.workflow.scoring import approximation_acceptance, plot_ess_per_second, score_row
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import INTEGER, ListOf, Table, one_of

METHODS = methods_in("pde")
BASELINE = "pcn"
"""The method whose first row ``vs_pcn`` divides by (the paper's baseline)."""
REFERENCE = "h-pcn"
"""The ``reference`` sampler's method unless its table sets one (exact; it proposes about the Laplace fit)."""
COLUMNS = [
    "sampler",
    "settings",
    "seconds",
    "acceptance",
    "ess_min",
    "ess_bulk_min",
    "ess_tail_min",
    "ess_per_second",
    "ess_per_second_sampling",
    "vs_pcn",
    "log_lik_mean",
    "z_max",
    "rhat_max",
    "passes",
    "exact",
]
FAMILY_ALPHA = 1e-3
"""Family-wise false-alarm rate of ``passes``: z_max below the Bonferroni limit over every mean and sd."""
SURROGATE_COLUMNS = ["approximation", "relative_cost", "log_ratio_sd", "log_ratio_sd_no_error_model"]


def _sampler_schema(table: dict[str, Any]) -> dict[str, Any]:
    method = table.get("method", BASELINE)
    setting = Setting(method) if method in METHODS else Setting(BASELINE)
    own = {k: setting for k in keys(method)} if method in METHODS else {}
    return {"method": one_of(*METHODS), **own}


SCHEMA = Table(
    {
        "posterior": Table(
            {"n": INTEGER, "degree": INTEGER, "regime": one_of(*NOISE_REGIMES), "prior": one_of(*PRIORS)}
        ),
        "chains": INTEGER,
        "draws": INTEGER,
        "warmup": INTEGER,
        "reference": Table(_sampler_schema),
        "samplers": ListOf(Table(_sampler_schema, required=("method",))),
    }
)


def describe(config) -> str:
    """The settings that tell a row from its neighbours."""
    parts = []
    for key in ("pcn_step", "step_size", "n_steps", "latent_dim", "moves", "jump", "inner_steps", "thin"):
        value = getattr(config, key, None)
        if value is not None and (key in config.user_keys() or key in ("pcn_step", "latent_dim")):
            parts.append(f"{key}={value:.3g}" if isinstance(value, float) else f"{key}={value}")
    if getattr(config, "approx", None) is not None:
        parts.insert(0, config.approx.label)
    if getattr(config, "ladder", None):
        parts.insert(0, " > ".join(a.label for a in config.ladder))
    return ", ".join(parts)


def pde_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    options = {
        "n": 20,
        "degree": 1,
        "regime": "observations",
        "prior": "exponential",
        **step.get("posterior", {}),
    }
    posterior = elliptic_posterior(seed=seed, **options)
    target = PDETarget(posterior)
    chains, draws = int(step.get("chains", 4)), int(step.get("draws", 1000))
    where = f"step {step['name']!r}"

    def config_of(table: dict[str, Any]):
        settings = {"chains": chains, "draws": draws, **{k: v for k, v in table.items() if k != "method"}}
        config = make_config(table["method"], settings, where)
        target.check(config)
        if method_spec(config.method).latent:
            require_latent(f"{where}: method {config.method!r}")
        return config

    configs = [config_of(s) for s in step.get("samplers", [])]
    reference_config = config_of({"method": REFERENCE, "draws": 4 * draws, **step.get("reference", {})})
    print(f"  {posterior!r}, noise sd {posterior.noise_sd:.3g}", flush=True)
    tuning = target.warm_up(chains, int(step.get("warmup", 500)), spawn_seed(seed, 0), print)

    print(f"  reference: {method_label(reference_config)}, {describe(reference_config)}", flush=True)
    reference_run = run_sampler(
        reference_config, target, {}, tuning, seed=seed, seeds=spawn_seeds(spawn_seed(seed, 1), SEEDS)
    )
    reference = reference_run.to_inference_data()

    points = reference_run.run.positions.reshape(-1, target.dim)
    points = points[np.random.default_rng(spawn_seed(seed, 2)).choice(len(points), 50, replace=False)]
    surrogate_rows = _describe_surrogates(target, configs, points, seed)
    if surrogate_rows:
        print(write_table(folder, "surrogates", surrogate_rows, SURROGATE_COLUMNS))

    tasks = []
    for k, config in enumerate(configs):
        seeds = spawn_seeds(spawn_seed(seed, 3, k), SEEDS)
        announce = f"  {method_label(config)}: {describe(config)}"
        tasks.append(SamplerTask(config, target, {}, tuning, seed, announce=announce,
                                 options={"seeds": seeds, "describe": False}))  # fmt: skip
    results = run_samplers(context.executor, tasks)
    scalars = sum(int(np.prod(reference.posterior[v].shape[2:])) for v in reference.posterior.data_vars)
    limit = float(norm.ppf(1 - FAMILY_ALPHA / (2 * 2 * scalars)))  # a mean and an sd per scalar
    rows = [_row(reference_run, None, reference, limit, "reference: ")]
    for result in results:
        rows.append(_row(result, None, reference, limit))
    baseline = next((r for r in rows[1:] if r["method"] == BASELINE), None)
    for row in rows:
        row["vs_pcn"] = row["ess_per_second"] / baseline["ess_per_second"] if baseline else float("nan")
    table = write_table(folder, "table", rows, COLUMNS)
    plot_ess_per_second([{**r, "settings": r["settings"]} for r in rows], folder / "ess_per_second.png")
    print(table)
    return {"rows": rows, "surrogates": surrogate_rows, "reference": reference}


def _row(result, nuts, reference, limit: float, prefix: str = "") -> dict[str, Any]:
    row = score_row(result, nuts, settings=describe(result.config), reference=reference)
    row["passes"] = bool(row["z_max"] < limit and not row["rhat_max"] >= 1.1)
    moves = approximation_acceptance(result)
    row["acceptance"] = row["acceptance"] if moves is None else moves
    row["sampler"] = prefix + row["sampler"]
    row["method"] = result.method
    row["log_lik_mean"] = float(np.mean(result.run.constrained["log_lik"]))
    row["spec"] = result.config.as_dict()
    for key in ("vs_nuts", "vs_nuts_sampling"):
        row.pop(key, None)
    return row


def _describe_surrogates(target: PDETarget, configs, points: np.ndarray, seed: int) -> list[dict]:
    """Each surrogate's cost and log-ratio spread at reference draws, with and without its error model."""
    specs = {
        a.label: a
        for c in configs
        for a in [getattr(c, "approx", None), *(getattr(c, "ladder", None) or [])]
        if a is not None
    }
    config = make_config("dc", {"approx": {"kind": "linearized"}})
    rows = []
    for label, spec in specs.items():
        exact = KeepConstants(target.with_data())
        row = describe_approximation(exact, approximation(spec, target, {}, config, seed), points, label)
        plain = Approximation(kind=spec.kind, m=spec.m, scale=False)
        if spec.scale:
            bare = approximation(plain, target, {}, config, seed)
            row["log_ratio_sd_no_error_model"] = describe_approximation(exact, bare, points, plain.label)[
                "log_ratio_sd"
            ]
        rows.append(row)
    return rows
