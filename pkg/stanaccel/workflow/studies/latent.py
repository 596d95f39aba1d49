"""Latent-space samplers (Deep MCMC) against Stan NUTS on Bayesian logistic regression.

A ``latent_study`` step:

1. makes the data (``data``: ``{generator = "logistic", ...options}`` or
   ``{generator = "digits"}``), with a held-out test set;
2. runs Stan NUTS, the paper's baseline (``nuts``: warmup, draws), timed
   with its warm-up, and a long NUTS ``reference`` run for the bias of the
   approximate samplers (means, sds and test-set predictive probabilities);
3. runs the autoencoder pipeline once: a short NUTS ``pilot`` (warm-up
   only, about a tenth of the baseline's run, as in the paper), whose later
   warm-up draws train the ``autoencoder`` (architecture, latent_dim, ...).
   The pilot's time and the training time are charged to every latent
   sampler; the pilot's last draws are their starting points, its step size
   and metric those of the full-space HMC move;
4. runs each sampler in ``samplers`` through
   :func:`stanaccel.sampling.run.run_sampler`, with the keys of
   ``stanaccel sample``: ``method = "ae-hmc"`` (``latent_n_steps``,
   ``exact``, ``route = "chain-rule" | "stan"``, ``encoded_momentum``),
   ``"ae-pcn"`` (``exact``), ``"latent-nuts"`` (Stan NUTS on the latent Stan
   program with ``warmup``, its draws decoded: the paper's pipeline,
   approximate) or ``"hmc"`` (the full-space move alone, ``n_steps``).
   Latent steps are tuned to an acceptance rate during ``tune`` iterations
   (charged) unless set (``latent_step_size``, ``pcn_step``). The exact
   modes alternate the latent move with a full-space HMC move of
   ``complement_steps`` leapfrog steps, which they need to reach the
   directions off the decoder's image. AE-pCN's reference is the model's
   Gaussian prior, N(0, prior_scale^2), as in the paper.

It writes ``table.{md,csv,json}`` (time with warm-up, pilot, training and
tuning charged; ESS per second and its ratio to NUTS; test accuracy; bias
against the reference: the largest error of a posterior mean in reference sds,
the range of sd ratios, the largest z-score, the largest error of a
predictive probability; ``exact`` says which samplers leave pi invariant),
``ess_per_second.png`` (a bar per sampler), ``routes.md`` (seconds per
latent potential-and-gradient by the chain rule through the NumPy decoder
and by the latent Stan program), ``autoencoder/`` (the trained model) and
``reconstruction.json``.

NUTS, the reference, the pilot and the training run here, once; the
samplers are independent runs with their own seeds, mapped over the
workflow's executor (the trained decoder's weights travel with each).
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from scipy.special import expit

from stanaccel.datasets import generate
from stanaccel.diagnostics import reference_z_scores, to_inference_data
from stanaccel.extras import require_latent
from stanaccel.latent import Autoencoder, decoder_data
from stanaccel.programs import program_path
from stanaccel.sampling.config import keys, make_config
from stanaccel.sampling.methods import method_spec, methods_in
from stanaccel.sampling.program import prepare_data
from stanaccel.sampling.result import method_label
from stanaccel.sampling.tasks import SamplerTask, run_samplers
from stanaccel.sampling.training import Trained
from stanaccel.seeds import spawn_seed
from stanaccel.stan import StanModel, compile_program
from stanaccel.workflow.sample import Setting
from stanaccel.workflow.scoring import nuts_row, plot_ess_per_second, score_row
from stanaccel.workflow.studies.baseline import Run, nuts_runs, pilot_tuning
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import INTEGER, NUMBER, ListOf, Table, generator_options, keys_of, one_of

METHODS = methods_in("latent")
COLUMNS = [
    "sampler",
    "exact",
    "settings",
    "seconds",
    "ess_min",
    "ess_bulk_min",
    "ess_tail_min",
    "ess_per_second",
    "vs_nuts",
    "vs_nuts_sampling",
    "rhat_max",
    "acceptance",
    "evaluations_per_iteration",
    "ess_per_1000_evaluations",
    "test_accuracy",
    "mean_error_sd",
    "sd_ratio_min",
    "sd_ratio_max",
    "z_max",
    "predictive_error_max",
]
# The autoencoder is trained once for all samplers (the ``autoencoder`` table), and the latent
# Stan program is the bundled one (``route``), so those settings are the study's, not a sampler's.
STUDY_OWNED = {
    "chains",
    "draws",
    "latent_dim",
    "architecture",
    "epochs",
    "train_from",
    "latent_program",
    "prior_sd",
}


def _sampler_schema(table: dict[str, Any]) -> dict[str, Any]:
    method = table.get("method", "ae-hmc")
    spec = method_spec(method if method in METHODS else "ae-hmc")
    # warmup: the study's pilot's, but the sampler's own where Stan's NUTS samples (on the latent program)
    owned = STUDY_OWNED | ({"warmup"} if spec.build is not None else set())
    own = [k for k in keys(spec.name) if k not in owned]
    return {
        "method": one_of(*METHODS),
        "route": one_of("chain-rule", "stan"),
        **{k: Setting(method) for k in own},
    }


RUN = Table({"warmup": INTEGER, "draws": INTEGER})
SCHEMA = Table(
    {
        # ``generator`` (default logistic) decides which options the data table may set.
        "data": Table(
            lambda data: {
                "generator": one_of("logistic", "digits"),
                **generator_options(data.get("generator", "logistic")),
            }
        ),
        "chains": INTEGER,
        "draws": INTEGER,
        "nuts": RUN,
        "reference": RUN,
        "pilot": Table({"warmup": INTEGER, "train_from": NUMBER}),
        "autoencoder": Table(keys_of(Autoencoder.fit)),
        "samplers": ListOf(Table(_sampler_schema, required=("method",))),
    }
)


def latent_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    require_latent(f"step {step['name']!r} (latent_study)")  # before the NUTS runs
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    options = dict(step.get("data", {}))
    dataset = generate(options.pop("generator", "logistic"), seed=seed, **options)
    compiled = compile_program(program_path("logistic"))
    data = prepare_data(compiled, dataset.data)
    X_test, y_test = dataset.truth["X_test"], dataset.truth["y_test"]
    model = StanModel(compiled, data)
    chains = int(step.get("chains", 4))
    draws = int(step.get("draws", 1000))
    print(f"  logistic regression: N={data['N']}, {model.dim} parameters, {len(y_test)} test points")

    nuts = {"warmup": 1000, "draws": 1000, **step.get("nuts", {})}
    ref = {"warmup": 1000, "draws": 5000, **step.get("reference", {})}
    pilot = {"warmup": max(nuts["warmup"] // 5, 100), "train_from": 0.5, **step.get("pilot", {})}
    runs = nuts_runs(
        model,
        chains,
        Run("Stan NUTS", nuts["warmup"], nuts["draws"], spawn_seed(seed, 0)),
        Run("reference: Stan NUTS", ref["warmup"], ref["draws"], spawn_seed(seed, 1)),
        Run("pilot for the autoencoder: Stan NUTS", pilot["warmup"], 1, spawn_seed(seed, 2), progress=False),
        progress=context.progress,
    )
    fit, ref_fit = runs.baseline, runs.reference
    reference = Posterior(ref_fit.draws_unconstrained, X_test, y_test)
    nuts_score = nuts_row(fit)
    rows = [{**nuts_score, **_bias(Posterior(fit.draws_unconstrained, X_test, y_test), reference)}]

    # The autoencoder trains on the pilot's later warm-up draws.
    first = int(pilot["warmup"] * pilot["train_from"])
    training = runs.pilot.warmup_unconstrained[:, first:].reshape(-1, model.dim)
    tuning = pilot_tuning(runs.pilot, training)
    autoencoder = Autoencoder.fit(training, **{"seed": spawn_seed(seed, 3), **step.get("autoencoder", {})})
    autoencoder.save(folder / "autoencoder")
    maps = autoencoder.maps()
    reconstruction = {
        "training_draws": len(training),
        "latent_dim": maps.latent_dim,
        "architecture": autoencoder.architecture,
        "epochs": autoencoder.report.epochs,
        "training_seconds": autoencoder.report.seconds,
        "pilot_seconds": tuning.seconds,
        "training": _short(autoencoder.reconstruction(training)),
        "reference": _short(autoencoder.reconstruction(ref_fit.draws_unconstrained)),
    }
    (folder / "reconstruction.json").write_text(json.dumps(reconstruction, indent=1))
    print(f"  autoencoder: {json.dumps(reconstruction)}", flush=True)
    trained = Trained(maps, autoencoder.report.seconds, reconstruction, autoencoder)
    latent_program = program_path("logistic_latent")
    latent_data = {k: data[k] for k in ("N", "K", "X", "y", "prior_scale")} | decoder_data(maps)
    routes = _route_costs(model, compile_program(latent_program), latent_data, maps, training)
    print(write_table(folder, "routes", [routes], list(routes)))

    shared = Trained(maps, trained.seconds, trained.report)  # the Keras model stays here: tasks need the maps
    tasks = []
    for k, spec in enumerate(step.get("samplers", [])):
        settings = {key: value for key, value in spec.items() if key not in ("method", "route")}
        settings.update(chains=chains, draws=draws)
        if "prior_sd" in keys(spec["method"]):  # a pCN reference: the model's Gaussian prior
            settings["prior_sd"] = float(data["prior_scale"])
        if spec.get("route") == "stan" or "latent_program" in method_spec(spec["method"]).needs:
            settings["latent_program"] = str(latent_program)
        config = make_config(spec["method"], settings, f"step {step['name']!r}: samplers[{k}]")
        name, description = describe(config)
        announce, options = f"  {name}: {description}", {"trained": shared}
        tasks.append(SamplerTask(config, model, data, tuning, spawn_seed(seed, 4, k), announce=announce,
                                 options=options))  # fmt: skip
    for task, result in zip(tasks, run_samplers(context.executor, tasks), strict=True):
        name, description = describe(task.config)
        rows.append(_row(result, name, description, rows[0], reference, X_test, y_test))
        print(f"  {name}: {_brief(rows[-1])}", flush=True)
    table = write_table(folder, "table", rows, COLUMNS)
    plot_ess_per_second(rows, folder / "ess_per_second.png")
    print(table)
    return {"rows": rows, "reconstruction": reconstruction}


class Posterior:
    """Draws (chains, draws, dim) of (alpha, w) and what the study compares."""

    def __init__(self, draws: np.ndarray, X_test: np.ndarray, y_test: np.ndarray):
        self.draws = draws
        self.idata = to_inference_data({"posterior": {"theta": draws}})
        flat = draws.reshape(-1, draws.shape[-1])
        self.mean, self.sd = flat.mean(axis=0), flat.std(axis=0)
        probabilities = expit(draws[..., :1] + draws[..., 1:] @ X_test.T)  # (chains, draws, n_test)
        self.predictive = probabilities.reshape(-1, len(y_test)).mean(axis=0)
        self.predictive_idata = to_inference_data({"posterior": {"p": probabilities}})
        self.accuracy = float(np.mean((self.predictive > 0.5) == y_test))


def _bias(posterior: Posterior, reference: Posterior) -> dict[str, float]:
    z = np.abs(reference_z_scores(posterior.idata, reference.idata))
    return {
        "test_accuracy": posterior.accuracy,
        "mean_error_sd": float(np.max(np.abs(posterior.mean - reference.mean) / reference.sd)),
        "sd_ratio_min": float(np.min(posterior.sd / reference.sd)),
        "sd_ratio_max": float(np.max(posterior.sd / reference.sd)),
        "z_max": float(np.nanmax(z)),
        "predictive_error_max": float(np.max(np.abs(posterior.predictive - reference.predictive))),
    }


def _row(result, name: str, settings: str, nuts: dict, reference, X_test, y_test) -> dict[str, Any]:
    """The scored row with the bias columns: test accuracy, mean and sd errors, predictive error."""
    row = score_row(result, nuts, settings=settings, sampler=name)
    summaries = [s for s in result.reports.get("summaries", []) if s]
    if summaries and "latent_acceptance" in summaries[0]:
        row["acceptance"] = float(np.mean([s["latent_acceptance"] for s in summaries]))
    tuned = result.sources.get("latent_step_size", result.sources.get("pcn_step"))
    if tuned == "tuned":
        step = getattr(result.config, "latent_step_size", None) or result.config.pcn_step
        row["settings"] += f", tuned step {step:.3g}"
    return {
        **row,
        **_bias(Posterior(result.run.positions, X_test, y_test), reference),
        "spec": result.config.as_dict(),
    }


def describe(config) -> tuple[str, str]:
    """(sampler name, settings) for the table."""
    spec = method_spec(config.method)
    if not spec.latent:  # the full-space move alone
        return f"{method_label(config)} (full space)", f"L={config.n_steps}, NUTS pilot's step and metric"
    if "latent_program" in spec.needs:  # Stan's NUTS on the latent program
        return method_label(config), "latent Stan program, draws decoded"
    extra = f", + full-space HMC L={config.complement_steps}" if config.exact else ""
    if hasattr(config, "latent_n_steps"):  # HMC in the latent space
        route = "" if config.latent_program is None else ", latent Stan program"
        momentum = ", p_h = E p_v (paper's literal momentum)" if config.encoded_momentum else ""
        return method_label(config), f"L={config.latent_n_steps}{route}{momentum}{extra}"
    return method_label(config), f"prior reference{extra}"


def _route_costs(model, latent_program, latent_data, maps, points, n: int = 200) -> dict[str, float]:
    """Seconds per latent potential and gradient: chain rule through NumPy, and the latent Stan program."""
    codes = maps.encode(points[np.random.default_rng(0).choice(len(points), n)])
    latent = StanModel(latent_program, latent_data)
    start = time.perf_counter()
    for z in codes:
        _, grad = model.log_density_gradient(maps.decode(z))
        maps.decode_vjp(z, grad)
    chain_rule = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for z in codes:
        latent.log_density_gradient(z)
    stan = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for z in codes:
        model.log_density_gradient(maps.decode(z))
    return {
        "chain_rule_seconds": chain_rule,
        "stan_program_seconds": stan,
        "original_gradient_seconds": (time.perf_counter() - start) / n,
    }


def _short(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "rmse_per_coordinate"}


def _brief(row: dict) -> str:
    return ", ".join(
        f"{k} {row[k]:.3g}"
        for k in (
            "seconds",
            "ess_per_second",
            "vs_nuts",
            "acceptance",
            "test_accuracy",
            "mean_error_sd",
            "z_max",
        )
    )
