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
4. runs each sampler in ``samplers``: ``method = "ae-hmc"`` (``n_steps``,
   ``exact``, ``route = "chain-rule" | "stan"``, ``encoded_momentum``),
   ``"ae-pcn"`` (``exact``, ``step``), ``"latent-nuts"`` (Stan NUTS on the
   latent Stan program with ``warmup``, its draws decoded: the paper's
   pipeline, approximate) or ``"hmc"`` (the full-space move alone, ``n_steps``).
   Latent step sizes are tuned to an acceptance rate during ``tune``
   iterations (charged), starting from ``step_size`` (AE-HMC) or ``step``
   (AE-pCN). The exact modes alternate the latent move with a
   full-space HMC move of ``complement_steps`` leapfrog steps, which they need
   to reach the directions off the decoder's image.

It writes ``table.{md,csv,json}`` (time with warm-up, pilot, training and
tuning charged; ESS per second and its ratio to NUTS; test accuracy; bias
against the reference: the largest error of a posterior mean in reference sds,
the range of sd ratios, the largest z-score, the largest error of a
predictive probability; ``exact`` says which samplers leave pi invariant),
``ess_per_second.png`` (a bar per sampler), ``routes.md`` (seconds per
latent potential-and-gradient by the chain rule through the NumPy decoder
and by the latent Stan program), ``autoencoder/`` (the trained model) and
``reconstruction.json``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from scipy.special import expit

from stanaccel.datasets import generate
from stanaccel.diagnostics import convergence_metrics, reference_z_scores, to_inference_data
from stanaccel.kernels import HMC, Cycle, run_chains
from stanaccel.latent import Autoencoder, AutoencoderHMC, AutoencoderPCN, decoder_data, tune_step
from stanaccel.programs import program_path
from stanaccel.stan import StanModel, compile_program
from stanaccel.stan.nuts import sample_nuts
from stanaccel.workflow.approximation_study import plot_ess_per_second
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import (
    BOOLEAN,
    INTEGER,
    NUMBER,
    ListOf,
    Table,
    generator_options,
    keys_of,
    one_of,
)

METHODS = ("ae-hmc", "ae-pcn", "hmc", "latent-nuts")
COLUMNS = ["sampler", "exact", "settings", "seconds", "ess_bulk_min", "ess_per_second", "vs_nuts",
           "vs_nuts_sampling", "rhat_max", "acceptance", "evaluations_per_iteration",
           "ess_per_1000_evaluations", "test_accuracy", "mean_error_sd", "sd_ratio_min", "sd_ratio_max",
           "z_max", "predictive_error_max"]  # fmt: skip


RUN = Table({"warmup": INTEGER, "draws": INTEGER})
SAMPLER = Table(
    {
        "method": one_of(*METHODS),
        "exact": BOOLEAN,
        "route": one_of("chain-rule", "stan"),
        "n_steps": INTEGER,
        "complement_steps": INTEGER,
        "encoded_momentum": BOOLEAN,
        "step_size": NUMBER,
        "step": NUMBER,
        "tune": INTEGER,
        "warmup": INTEGER,
    },
    required=("method",),
)
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
        "samplers": ListOf(SAMPLER),
    }
)


def latent_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    options = dict(step.get("data", {}))
    dataset = generate(options.pop("generator", "logistic"), seed=seed, **options)
    data, X_test, y_test = dataset.data, dataset.truth["X_test"], dataset.truth["y_test"]
    model = StanModel(compile_program(program_path("logistic")), data)
    chains = int(step.get("chains", 4))
    draws = int(step.get("draws", 1000))
    print(f"  logistic regression: N={data['N']}, {model.dim} parameters, {len(y_test)} test points")

    nuts = {"warmup": 1000, "draws": 1000, **step.get("nuts", {})}
    print(f"  Stan NUTS ({nuts['warmup']} + {nuts['draws']} per chain)", flush=True)
    start = time.perf_counter()
    fit = sample_nuts(model, chains=chains, warmup=nuts["warmup"], draws=nuts["draws"], seed=seed % 2**32,
                      progress=context.progress)  # fmt: skip
    nuts_seconds = time.perf_counter() - start
    ref = {"warmup": 1000, "draws": 5000, **step.get("reference", {})}
    print(f"  reference: Stan NUTS ({ref['warmup']} + {ref['draws']} per chain)", flush=True)
    ref_fit = sample_nuts(model, chains=chains, warmup=ref["warmup"], draws=ref["draws"],
                          seed=seed % 2**32 + 7, progress=context.progress)  # fmt: skip
    reference = Posterior(ref_fit.draws_unconstrained, X_test, y_test)
    rows = [_nuts_row(fit, nuts_seconds, nuts, reference, X_test, y_test)]

    pilot = {"warmup": max(nuts["warmup"] // 5, 100), "train_from": 0.5, **step.get("pilot", {})}
    print(f"  pilot: Stan NUTS warm-up ({pilot['warmup']} per chain) for the autoencoder", flush=True)
    start = time.perf_counter()
    pilot_fit = sample_nuts(model, chains=chains, warmup=pilot["warmup"], draws=1, seed=seed % 2**32 + 1,
                            progress=False)  # fmt: skip
    pilot_seconds = time.perf_counter() - start
    first = int(pilot["warmup"] * pilot["train_from"])
    training = pilot_fit.warmup_unconstrained[:, first:].reshape(-1, model.dim)
    ae_options = {"seed": seed, **step.get("autoencoder", {})}
    autoencoder = Autoencoder.fit(training, **ae_options)
    autoencoder.save(folder / "autoencoder")
    maps = autoencoder.maps()
    reconstruction = {
        "training_draws": len(training),
        "latent_dim": maps.latent_dim,
        "architecture": autoencoder.architecture,
        "epochs": autoencoder.report.epochs,
        "training_seconds": autoencoder.report.seconds,
        "pilot_seconds": pilot_seconds,
        "training": _short(autoencoder.reconstruction(training)),
        "reference": _short(autoencoder.reconstruction(ref_fit.draws_unconstrained)),
    }
    (folder / "reconstruction.json").write_text(json.dumps(reconstruction, indent=1))
    print(f"  autoencoder: {json.dumps(reconstruction)}", flush=True)
    charged = pilot_seconds + autoencoder.report.seconds
    pilot_step = float(np.mean(pilot_fit.step_size))
    pilot_metric = np.mean(pilot_fit.inv_metric, axis=0)
    starts = pilot_fit.draws_unconstrained[:, -1]
    latent_program = compile_program(program_path("logistic_latent"))
    latent_data = {k: data[k] for k in ("N", "K", "X", "y", "prior_scale")} | decoder_data(maps)
    routes = _route_costs(model, latent_program, latent_data, maps, training)
    print(write_table(folder, "routes", [routes], list(routes)))

    prior = (np.zeros(model.dim), np.full(model.dim, data["prior_scale"] ** 2))
    for k, spec in enumerate(step.get("samplers", [])):
        spec = {"exact": False, "route": "chain-rule", "n_steps": 10, "complement_steps": 3,
                "encoded_momentum": False, **spec}  # fmt: skip
        if spec["method"] not in METHODS:
            raise ValueError(f"unknown latent-study method {spec['method']!r}; have {METHODS}")
        name, settings = describe(spec)
        print(f"  {name}: {settings}", flush=True)
        if spec["method"] == "latent-nuts":
            latent_model = StanModel(latent_program, latent_data)
            rows.append(_latent_nuts_row(spec, latent_model, maps, starts, draws, seed + k, charged, rows[0],
                                         reference, X_test, y_test))  # fmt: skip
            print(f"    {_brief(rows[-1])}", flush=True)
            continue

        def latent_kernel(density, latent, step_size, spec=spec):
            if spec["method"] == "ae-hmc":
                momentum = spec["encoded_momentum"]
                return AutoencoderHMC(density, maps, step_size, int(spec["n_steps"]), exact=spec["exact"],
                                      latent_density=latent, encoded_momentum=momentum)  # fmt: skip
            return AutoencoderPCN(density, maps, exact=spec["exact"], prior=prior, step=step_size)

        def densities(spec=spec):
            """A chain's own Stan instances: the model, and the latent program on the Stan route."""
            latent = StanModel(latent_program, latent_data) if spec["route"] == "stan" else None
            return model.with_data(data), latent

        def build(chain: int, spec=spec, latent_kernel=latent_kernel, densities=densities, step_size=None):
            own, latent = densities()
            if spec["method"] == "hmc":
                return HMC(own, pilot_step, int(spec["n_steps"]), inv_metric=pilot_metric)
            kernel = latent_kernel(own, latent, step_size)
            if not spec["exact"]:
                return kernel
            return Cycle(
                [kernel, HMC(own, pilot_step, int(spec["complement_steps"]), inv_metric=pilot_metric)]
            )

        start = time.perf_counter()
        tuned = None
        if spec["method"] != "hmc":
            own = densities()
            tuned = _tune(lambda h, f=latent_kernel, own=own: f(*own, h), spec, starts[0], seed + k)
        tune_seconds = time.perf_counter() - start
        run = run_chains(lambda c, tuned=tuned, build=build: build(c, step_size=tuned), starts, draws,
                         seed=seed + 100 + k, name=name)  # fmt: skip
        rows.append(_row(run, spec, name, settings, charged + tune_seconds, tuned, rows[0], reference,
                         X_test, y_test))  # fmt: skip
        print(f"    {_brief(rows[-1])}", flush=True)
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


def _efficiency(metrics: dict, evaluations: int, nuts_row: dict | None) -> dict[str, float]:
    """ESS, ESS per second (all charged, and sampling only) and their ratios to the NUTS row."""
    return {
        "ess_bulk_min": metrics["ess_bulk_min"],
        "ess_per_second": metrics["ess_per_second"],
        "ess_per_second_sampling": metrics["ess_per_second_sampling"],
        "vs_nuts": 1.0 if nuts_row is None else metrics["ess_per_second"] / nuts_row["ess_per_second"],
        "vs_nuts_sampling": 1.0
        if nuts_row is None
        else metrics["ess_per_second_sampling"] / nuts_row["ess_per_second_sampling"],
        "rhat_max": metrics["rhat_max"],
        "ess_per_1000_evaluations": 1000 * metrics["ess_bulk_min"] / max(int(evaluations), 1),
    }


def _nuts_row(fit, seconds, nuts, reference, X_test, y_test) -> dict[str, Any]:
    posterior = Posterior(fit.draws_unconstrained, X_test, y_test)
    warmup_share = fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1)
    metrics = convergence_metrics(
        posterior.idata, wall_seconds=seconds, sampling_seconds=seconds * (1 - warmup_share)
    )
    iterations = fit.draws_unconstrained.shape[0] * (nuts["warmup"] + nuts["draws"])
    return {
        "sampler": "Stan NUTS",
        "exact": True,
        "settings": f"{nuts['warmup']} warm-up + {nuts['draws']} draws",
        "seconds": seconds,
        **_efficiency(metrics, fit.gradient_evaluations, None),
        "acceptance": float(np.mean(fit.sample_stats["acceptance_rate"])),
        "evaluations_per_iteration": fit.gradient_evaluations / iterations,
        **_bias(posterior, reference),
    }


def _row(run, spec, name, settings, charged, tuned, nuts_row, reference, X_test, y_test) -> dict[str, Any]:
    posterior = Posterior(run.positions, X_test, y_test)
    metrics = convergence_metrics(posterior.idata, wall_seconds=run.wall_seconds + charged,
                                  sampling_seconds=run.wall_seconds)  # fmt: skip
    iterations = run.positions.shape[0] * run.positions.shape[1]
    return {
        "sampler": name,
        "exact": bool(run.exact),
        "settings": settings + ("" if tuned is None else f", tuned step {tuned:.3g}"),
        "seconds": run.wall_seconds + charged,
        "charged_seconds": charged,
        **_efficiency(metrics, run.evaluations.sum(), nuts_row),
        "acceptance": float(np.mean([s.get("latent_acceptance", np.nan) for s in run.summaries]))
        if run.summaries and run.summaries[0]
        else float(np.mean(run.acceptance_probability)),
        "evaluations_per_iteration": run.evaluations.sum() / iterations,
        **_bias(posterior, reference),
        "spec": spec,
    }


def _latent_nuts_row(spec, latent_model, maps, starts, draws, seed, charged, nuts_row, reference,
                     X_test, y_test) -> dict[str, Any]:  # fmt: skip
    """Stan NUTS on the latent program, its draws decoded (the paper's pipeline; approximate)."""
    warmup = int(spec.get("warmup", 500))
    start = time.perf_counter()
    fit = sample_nuts(latent_model, chains=len(starts), warmup=warmup, draws=draws,
                      inits=maps.encode(starts), seed=seed % 2**32, progress=False)  # fmt: skip
    seconds = time.perf_counter() - start
    posterior = Posterior(maps.decode(fit.draws_unconstrained), X_test, y_test)
    warmup_share = fit.warmup_sample_stats["n_steps"].sum() / max(fit.gradient_evaluations, 1)
    metrics = convergence_metrics(posterior.idata, wall_seconds=seconds + charged,
                                  sampling_seconds=seconds * (1 - warmup_share))  # fmt: skip
    return {
        "sampler": "NUTS in the latent space (approximate)",
        "exact": False,
        "settings": f"latent Stan program, {warmup} warm-up + {draws} draws, decoded",
        "seconds": seconds + charged,
        "charged_seconds": charged,
        **_efficiency(metrics, fit.gradient_evaluations, nuts_row),
        "acceptance": float(np.mean(fit.sample_stats["acceptance_rate"])),
        "evaluations_per_iteration": fit.gradient_evaluations / (len(starts) * (warmup + draws)),
        **_bias(posterior, reference),
        "spec": spec,
    }


def describe(spec: dict[str, Any]) -> tuple[str, str]:
    """(sampler name, settings) for the table."""
    mode = "exact" if spec["exact"] else "approximate"
    if spec["method"] == "hmc":
        return "HMC (full space)", f"L={spec['n_steps']}, NUTS pilot's step and metric"
    if spec["method"] == "latent-nuts":
        return "NUTS in the latent space (approximate)", "latent Stan program, draws decoded"
    extra = f", + full-space HMC L={spec['complement_steps']}" if spec["exact"] else ""
    if spec["method"] == "ae-hmc":
        route = "" if spec["route"] == "chain-rule" else ", latent Stan program"
        momentum = ", p_h = E p_v (paper's literal momentum)" if spec["encoded_momentum"] else ""
        return f"AE-HMC ({mode})", f"L={spec['n_steps']}{route}{momentum}{extra}"
    return f"AE-pCN ({mode})", f"prior reference{extra}"


def _tune(make_kernel, spec, start, seed) -> float:
    """Latent HMC step size for acceptance 0.75, or pCN step h for 0.3, over ``tune`` iterations."""
    hmc = spec["method"] == "ae-hmc"
    return tune_step(make_kernel, start, np.random.default_rng([seed, 3]), target=0.75 if hmc else 0.3,
                     initial=spec.get("step_size", 0.1) if hmc else spec.get("step", 0.5),
                     iterations=int(spec.get("tune", 100)), maximum=20.0 if hmc else 3.9)  # fmt: skip


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
    return {"chain_rule_seconds": chain_rule, "stan_program_seconds": stan,
            "original_gradient_seconds": (time.perf_counter() - start) / n}  # fmt: skip


def _short(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "rmse_per_coordinate"}


def _brief(row: dict) -> str:
    return ", ".join(f"{k} {row[k]:.3g}" for k in ("seconds", "ess_per_second", "vs_nuts", "acceptance",
                                                   "test_accuracy", "mean_error_sd", "z_max"))  # fmt: skip
