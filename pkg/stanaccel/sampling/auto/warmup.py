"""Before the pilots: the quick path (Stan's NUTS at once where its whole run is projected short, kept
if its chains agree) and the cheap warm-up the candidates share (Laplace, else Pathfinder, else NUTS's)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from stanaccel.diagnostics.modes import visited_modes_report, within_chain_sd
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.draws import _bracketed, _unconstrained
from stanaccel.sampling.auto.race import FORMULA
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.config import DEFAULT_NUTS_WARMUP, make_config
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.result import SampleResult
from stanaccel.sampling.run import run_nuts
from stanaccel.sampling.warmup import (
    MODE_STARTS,
    Adaptation,
    cheap_warm_up,
    checkpoint_part,
    mirrored_starts,
    modes_apart,
    nuts_warm_up,
)
from stanaccel.stan.errors import StanError
from stanaccel.stan.optimize import modes_from_starts


def _quick_nuts(run: AutoRun) -> tuple[str, float]:
    """Why Stan's NUTS runs at once, without pilots (its whole run is projected short), or ""; the projection.

    A whole run of C chains x (warm-up + D) iterations is projected at
    :data:`QUICK_LEAPFROGS` gradients per iteration, each as long as one
    timed in C++ at the unconstrained origin (the fastest of three timings,
    as a pause only ever slows one), the chains in parallel on the cores
    there are. Below :data:`QUICK_NUTS_SECONDS` no pilot could pay for
    itself: a Laplace warm-up and a pilot take about a second in Python.
    The projection is infinite where the program cannot be evaluated at the origin.
    """
    import os

    model, auto = run.model, run.auto
    try:
        point = np.zeros(model.dim)
        per_gradient = model.time_log_density_gradient(point, 10)
        repeats = int(min(max(0.0005 / per_gradient, 10), 10_000))
        per_gradient = min(model.time_log_density_gradient(point, repeats) for _ in range(3))
    except Exception:  # a program that cannot be evaluated at the origin: the pilots will tell
        return "", float("inf")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    iterations = (DEFAULT_NUTS_WARMUP + auto.draws) * -(-auto.chains // min(auto.chains, cores))
    projected = per_gradient * constants.QUICK_LEAPFROGS * iterations
    if not np.isfinite(projected):
        return "", float("inf")
    if projected >= constants.QUICK_NUTS_SECONDS:
        return "", float(projected)
    return (
        f"a whole Stan NUTS run is projected at {projected:.2g} s ({per_gradient * 1e6:.3g} us per gradient, "
        f"{constants.QUICK_LEAPFROGS} per iteration), under {constants.QUICK_NUTS_SECONDS:g} s: no pilot "
        "could pay for itself, so Stan's NUTS runs at once, with its own warm-up"
    ), float(projected)


def _nuts_at_once(run: AutoRun, why: str) -> SampleResult:
    """Stan's NUTS as ``--method nuts --set metric=dense`` runs it (the same seeds, so the same draws; the
    diagonal metric above :data:`QUICK_DENSE_MAX_DIM` parameters), the check charged.

    Where its chains then disagree (R-hat above :data:`CHECK_RHAT`: stuck,
    as on posteriordb's ``arma11`` from some of Stan's random starts),
    :func:`sample_auto` goes on to the warm-up and the pilots, this run's
    seconds charged; its checkpoint is a part of its own so that NUTS's
    later run cannot resume these draws. It is said as tried first, not
    chosen: the choice is the reason recorded, and said, once it is kept.
    """
    model, auto, say = run.model, run.auto, run.say
    method = next(spec.name for spec in METHODS.values() if spec.auto == "own-warmup")
    metric = "dense" if model.dim <= constants.QUICK_DENSE_MAX_DIM else "diag"
    why = f"{why} (metric {metric})"
    line = f"auto: chose {method}: {why}"
    say(f"auto: trying {method} first: {why}; it is kept if its chains agree (split R-hat up to "
        f"{constants.CHECK_RHAT:g})")  # fmt: skip
    checked = time.perf_counter() - run.start
    config = make_config(method, {"chains": auto.chains, "draws": auto.draws, "metric": metric})
    result = run_nuts(config, model, model.name.removesuffix("_model"), run.seed, run.seeds, None,
                      run.progress, say, checkpoint_part(run.checkpoint, "auto quick nuts"))  # fmt: skip
    result.charged_seconds["auto check"] = checked
    result.reports["auto"] = {
        "chosen": method, "sampler": f"Stan NUTS ({metric} metric, its own warm-up)", "reason": line,
        "formula": FORMULA, "chains": auto.chains, "draws": auto.draws,
        "pilot_draws": auto.pilot_draws, "pilot_seconds": checked, "continued_draws": [], "reference": None,
        "warmup": {}, "modes": {}, "funnel": None, "skipped": {}, "pilots": [],
    }  # fmt: skip
    return result


def _check_modes(run: AutoRun, result: SampleResult) -> None:
    """The Laplace warm-up's modes check, on Stan's NUTS run at once: L-BFGS from
    :data:`~stanaccel.sampling.warmup.MODE_STARTS` mirrored starts (the Laplace warm-up's, at its seed),
    and where it ends at separated modes (:func:`~stanaccel.sampling.warmup.modes_apart`, in the draws'
    within-chain sds), whether NUTS's draws came near each. Chains that all settled in one of two modes
    agree (R-hat near 1), and only this tells. Sets ``reports["modes"]`` (what the verdict reads), its
    seconds charged as part of "auto check"; none above :data:`MODES_CHECK_MAX_DIM` parameters.
    """
    model, seed = run.model, run.seeds["warmup"]
    start = time.perf_counter()
    if model.dim > constants.MODES_CHECK_MAX_DIM:
        result.reports["modes"] = {
            "not_checked": f"{model.dim} parameters, above {constants.MODES_CHECK_MAX_DIM}"
        }
        return
    draws = _unconstrained(result)
    try:
        starts = mirrored_starts(model, MODE_STARTS, seed)
        modes = modes_from_starts(model, MODE_STARTS, inits=starts, seed=seed, jacobian=True)
    except StanError as error:  # L-BFGS ran off (improper) or failed: no modes to compare
        modes, why = [], " ".join(str(error).split())[:200]
    except KeyboardInterrupt:  # NUTS's draws are complete: keep them, unchecked
        modes, why = [], "stopped (Ctrl-C)"
    else:
        why = "" if len(modes) > 1 else f"{len(modes)} of {MODE_STARTS} L-BFGS runs ended, none to compare"
    found: dict[str, Any] = {}
    if len(modes) > 1:
        best = int(np.argmax([m.log_density for m in modes]))
        runs = f"L-BFGS from {len(modes)} starts"
        modes_apart(model, runs, "NUTS", [m.point for m in modes], best, within_chain_sd(draws), found)
    if found.get("mode_points"):
        names = [_bracketed(name) for name in model.param_unc_names()]
        report = visited_modes_report(found["mode_points"], found["mode_runs"], draws, names,
                                      found_in="auto's modes check")  # fmt: skip
    else:
        report = {"modes_found": min(len(modes), 1), "message": ""}
        if why:
            report["not_checked"] = why
    seconds = time.perf_counter() - start
    report.update(
        {key: found[key] for key in ("mode_separation", "mode_barrier", "mode_points") if key in found}
    )
    result.reports["modes"] = {**report, "seconds": seconds}
    result.charged_seconds["auto check"] = result.charged_seconds.get("auto check", 0.0) + seconds
    if report["message"]:
        run.say(f"modes: {report['message']}")


def _shared_warm_up(
    run: AutoRun, shared: list[tuple[MethodSpec, dict[str, Any]]]
) -> tuple[Adaptation, float, dict[str, Any]]:
    """The cheap warm-up the candidates share: Laplace, else Pathfinder, else NUTS's; its seconds, report.

    Where Laplace's L-BFGS failed from every start and NUTS's warm-up is
    shared, the report says so (``no_mode``): the approximations about the
    mode are then not piloted (their own search, from the origin, fails as
    surely, and costs as much).

    It runs for the full run's chains (their start points) with the settings
    of a candidate that moves with an HMC step, so that a step size is adapted.
    """
    model, auto, seeds, progress, say = run.model, run.auto, run.seeds, run.progress, run.say
    spec, settings = next(((s, k) for s, k in shared if s.uses_step_size(make_config(s.name, k))), shared[0])
    charged: dict[str, float] = {}
    report: dict[str, Any] = {}
    found: dict[str, Any] = {}  # the modes a cheap warm-up found, kept when the next one is tried
    no_mode = None
    laplace_k = None
    for index, kind in enumerate(constants.WARMUPS_TRIED):
        config = make_config(spec.name, {**settings, "chains": auto.chains, "warmup": kind})
        adaptation, report = cheap_warm_up(model, config, seeds, progress, say, charged, _next_warm_up(index))
        found = {key: report[key] for key in ("mode_points", "mode_runs") if key in report} or found
        if kind == "laplace" and str(report.get("fallback", "")).startswith("L-BFGS failed"):
            no_mode = "Stan's L-BFGS found no mode from any start of the Laplace warm-up"
        if kind == "laplace":
            laplace_k = report.get("pareto_k")
        if adaptation is not None:
            refused = {"laplace_pareto_k": laplace_k} if kind != "laplace" and laplace_k is not None else {}
            adaptation.report = {**report, **found, **refused, "tried": list(charged)}
            return adaptation, sum(charged.values()), adaptation.report
        if _hopeless(laplace_k):
            break
    config = make_config(spec.name, {**settings, "chains": auto.chains, "warmup": DEFAULT_NUTS_WARMUP})
    adaptation = nuts_warm_up(model, config, seeds, None, progress, say, charged)
    report = {**report, **found, "used": "nuts", "tried": list(charged)}
    if laplace_k is not None:
        report["laplace_pareto_k"] = laplace_k
    # Modes a cheap warm-up found travel with it: every run from it checks that its draws visit them.
    adaptation.report = {**report, "no_mode": no_mode} if no_mode else report
    return adaptation, sum(charged.values()), adaptation.report


def _next_warm_up(index: int):
    """What ``auto`` runs if cheap warm-up ``index`` of :data:`WARMUPS_TRIED` is refused, from its report."""
    if index + 1 == len(constants.WARMUPS_TRIED):
        return None  # cheap_warm_up's own: NUTS's warm-up

    def instead(report: dict[str, Any]) -> str:
        k = report.get("pareto_k") if constants.WARMUPS_TRIED[index] == "laplace" else None
        if _hopeless(k):
            return (
                f"auto does not try {constants.WARMUPS_TRIED[index + 1]} after a Pareto k of "
                f"{constants.HOPELESS_K:g} or more, "
                f"and Stan's NUTS warm-up runs instead ({DEFAULT_NUTS_WARMUP} iterations)"
            )
        return f"auto tries {constants.WARMUPS_TRIED[index + 1]} next"

    return instead


def _hopeless(k) -> bool:
    """Whether a refused Laplace fit's Pareto k ``k`` says its Gaussian is far off (:data:`HOPELESS_K`)."""
    return k is not None and bool(k >= constants.HOPELESS_K)
