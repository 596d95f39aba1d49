"""The pipeline of ``method = "auto"``: the quick path, the shared warm-up, the pilots' race, tempering
where the pilots disagree about the modes, the choice and its check, the full run and its report."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.diagnostics.funnel import Funnel
from stanaccel.diagnostics.metrics import split_rhat
from stanaccel.diagnostics.modes import visited_modes_report
from stanaccel.executors import SerialExecutor
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.candidates import _candidates, _far_gaussian, _order
from stanaccel.sampling.auto.choice import (
    _agreement,
    _check_choice,
    _choose,
    _funnel,
    _modes,
    pilot_line,
)
from stanaccel.sampling.auto.draws import _bracketed, _unconstrained
from stanaccel.sampling.auto.full_run import _full_run
from stanaccel.sampling.auto.race import FORMULA, Pilot, Race, _adapted_dense_pilot, _nuts_pilot, _pilot
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.auto.settings import AutoSettings
from stanaccel.sampling.auto.warmup import _check_modes, _nuts_at_once, _quick_nuts, _shared_warm_up
from stanaccel.sampling.config import NUTS_WARMUP, make_config
from stanaccel.sampling.methods import METHODS, MethodSpec
from stanaccel.sampling.result import SampleResult, method_label
from stanaccel.sampling.run import SEEDS
from stanaccel.sampling.warmup import DENSE_MAX_DIM, checkpoint_part
from stanaccel.seeds import spawn_seed, spawn_seeds
from stanaccel.stan.nuts import NutsFit

Candidates = list[tuple[MethodSpec, dict[str, Any]]]
"""The candidates, each with its settings, in the order they are piloted."""


def sample_auto(
    program, model, data: dict[str, Any], auto: AutoSettings, *, seed: int, progress: bool, say,
    checkpoint=None, executor=None,
) -> SampleResult:  # fmt: skip
    """Pilot the candidates, choose the one of highest projected ESS per second, run it in full.

    ``program`` is the user's program (a :class:`~stanaccel.sampling.program.Program`),
    ``model`` its compiled instance on ``data``. The result is the chosen
    method's, charged the shared warm-up and the pilots ("auto pilots"); its
    ``reports["auto"]`` holds the pilot table and the reason for the choice.
    A chosen kernel method's run continues its pilot's chains (checkpointed
    under ``checkpoint``, else in a temporary folder) unless its chains run
    on another ``executor``.
    """
    with tempfile.TemporaryDirectory(prefix="stanaccel-auto-") as folder:
        pilots_folder = checkpoint_part(checkpoint, "auto pilots") or Path(folder)
        start = time.perf_counter()
        if auto.pilot_draws > auto.draws:  # a pilot is the start of its full run: never longer than it
            say(f"auto: pilots of {auto.draws} draws per chain, the run's own length (pilot_draws = "
                f"{auto.pilot_draws} is longer than the run's draws)")  # fmt: skip
            auto = replace(auto, pilot_draws=auto.draws)
        seeds = spawn_seeds(seed, SEEDS)
        run = AutoRun(
            program, model, data, auto, seed, seeds, progress, say, pilots_folder, checkpoint, executor, start
        )
        return _sample_auto(run)


def _sample_auto(run: AutoRun) -> SampleResult:
    result, projected = _quick_path(run)
    if result is not None:
        return result
    candidates, skipped = _warm_up(run, projected)
    pilots, race = _pilots(run, candidates)
    reference, modes, funnel = _findings(run, pilots)
    if modes["disagree"]:
        reference = _tempering(run, candidates, pilots, modes, race.cap)
    best, eligible, line, pilot_seconds = _choice(run, pilots, reference, modes, skipped)
    best, line, pilot_seconds, checks = _checked(run, best, eligible, line, pilot_seconds)
    rows = [p.row(run.chain_draws, _is_chosen(p, best, pilots)) for p in pilots]
    result = _full_run(run, best, _method(best), pilot_seconds)
    # The verdict's findings: modes the pilots saw that the method run cannot reach, and (a kernel's run
    # checks it itself) modes the shared warm-up found that NUTS's draws never came near.
    modes["unresolved"] = modes["disagree"] and (best is None or best.role != "modes")
    warm_report = run.warm_report
    if warm_report.get("mode_points") and isinstance(result.run, NutsFit):
        names = [_bracketed(name) for name in run.model.param_unc_names()]
        result.reports["modes"] = visited_modes_report(warm_report["mode_points"], warm_report["mode_runs"],
                                                       _unconstrained(result), names)  # fmt: skip
    resumed = getattr(result.run, "resumed_draws", None)
    result.reports["auto"] = {
        "chosen": _method(best),
        "sampler": _sampler(best, result),
        "reason": line,
        "formula": FORMULA,
        "chains": run.auto.chains,
        "draws": run.auto.draws,
        "pilot_draws": run.auto.pilot_draws,
        "pilot_seconds": pilot_seconds,
        "continued_draws": [] if resumed is None else [int(d) for d in resumed],
        "reference": None if reference is None else reference.method,
        "warmup": warm_report,
        "modes": modes,
        "funnel": None if funnel is None else funnel.to_dict(),
        "skipped": skipped,
        "pilots": rows,
        "checks": checks,
    }
    return result


def _quick_path(run: AutoRun) -> tuple[SampleResult | None, float]:
    """Stan's NUTS at once where its whole run is projected short, kept unless its chains disagree (None:
    the pilots run, this run's seconds charged); the projection of a whole NUTS run."""
    quick, projected = _quick_nuts(run)
    if quick:
        result = _nuts_at_once(run, quick)
        rhat = split_rhat(_unconstrained(result))
        if result.interrupted:  # a stopped run keeps its draws, and stops
            return result, projected
        if not rhat > constants.CHECK_RHAT:
            _check_modes(run, result)
            return result, projected
        run.say(f"auto: Stan's NUTS did not mix (R-hat {rhat:.3g}, above {constants.CHECK_RHAT:g}): its "
                f"{time.perf_counter() - run.start:.1f} s are charged, and the others are "
                "piloted")  # fmt: skip
    return None, projected


def _warm_up(run: AutoRun, projected: float) -> tuple[Candidates, dict[str, str]]:
    """The candidates in the order they are piloted, after the warm-up those that take it share (in
    ``run``); why the others are not candidates.

    NUTS, the baseline, is piloted first after NUTS's own warm-up, or where
    a whole NUTS run is ``projected`` under :data:`~stanaccel.sampling.auto.constants.NUTS_FIRST_SECONDS`.
    """
    candidates, skipped = _candidates(run)
    candidates.sort(key=lambda candidate: _order(candidate[0]))
    shared = [(spec, s) for spec, s in candidates if spec.auto in ("warm", "approximation", "modes")]
    if shared:
        run.adaptation, run.warm_seconds, run.warm_report = _shared_warm_up(run, shared)
    adaptation = run.adaptation
    if adaptation is not None and (
        adaptation.warmup == NUTS_WARMUP or projected < constants.NUTS_FIRST_SECONDS
    ):
        candidates.sort(key=lambda candidate: candidate[0].auto != "own-warmup")  # NUTS, the baseline, first
    return candidates, skipped


def _pilots(run: AutoRun, candidates: Candidates) -> tuple[list[Pilot], Race]:
    """The pilots of the candidates but tempering, in their race; the race (its cap serves tempering's)."""
    auto, say, warm_report = run.auto, run.say, run.warm_report
    race = Race(run.chain_draws, float(np.log10(auto.chains * auto.pilot_draws)))
    pilots: list[Pilot] = []
    for index, (spec, settings) in enumerate(candidates):
        if spec.auto not in ("own-warmup", "warm", "approximation") or run.adaptation is None:
            continue
        if race.spent() and spec.auto != "own-warmup":
            pilots.append(Pilot(spec.name, spec.auto, spec.label, note=f"not piloted: {race.spent()[9:]}"))
        elif spec.auto == "approximation" and warm_report.get("no_mode"):
            label = method_label(make_config(spec.name, settings))
            pilots.append(Pilot(spec.name, spec.auto, label, note=f"not piloted: {warm_report['no_mode']}"))
            say(f"auto: {label} not piloted: its approximation is built about the mode, and "
                f"{warm_report['no_mode']}")  # fmt: skip
        elif far := _far_gaussian(spec, settings, warm_report):
            label = method_label(make_config(spec.name, settings))
            pilots.append(Pilot(spec.name, spec.auto, label, note=f"not piloted: {far}"))
            say(f"auto: {label} not piloted: {far}")
        elif spec.auto == "own-warmup":
            pilots.append(_nuts_pilot(run, spec, race, spawn_seed(run.seed, 1, index)))
            if _dense_adapts(run):
                race.enter(pilots[-1])
                pilots.append(_adapted_dense_pilot(run, spec, race, spawn_seed(run.seed, 2, index)))
        else:
            pilots.append(_pilot(run, spec, settings, race))
        race.enter(pilots[-1])
    return pilots, race


def _dense_adapts(run: AutoRun) -> bool:
    """Whether NUTS is also piloted with a dense metric from its warm-up's draws
    (:func:`~stanaccel.sampling.auto.race._adapted_dense_pilot`): where NUTS's own warm-up was shared
    (no cheap warm-up's Gaussian gave one), from 2 up to
    :data:`~stanaccel.sampling.warmup.DENSE_MAX_DIM` parameters."""
    adaptation = run.adaptation
    return (
        adaptation.warmup == NUTS_WARMUP
        and adaptation.dense is None
        and adaptation.draws is not None
        and 2 <= run.model.dim <= DENSE_MAX_DIM
        and len(adaptation.draws) > run.model.dim
    )


def _findings(run: AutoRun, pilots: list[Pilot]) -> tuple[Pilot | None, dict[str, Any], Funnel | None]:
    """What the pilots' draws show: the reference pilot (the others checked against it), whether their
    chains disagree about the modes, and a funnel."""
    model = run.model
    reference = _agreement(pilots)
    modes = _modes(pilots)
    names = [_bracketed(name) for name in model.param_unc_names()]
    funnel = _funnel(pilots, reference, names, getattr(model, "log_scale_coordinates", lambda: None)())
    if funnel is not None:
        run.say(f"auto: the pilots' draws show {funnel.message()}")
    return reference, modes, funnel


def _tempering(
    run: AutoRun, candidates: Candidates, pilots: list[Pilot], modes: dict[str, Any], cap: float
) -> Pilot | None:
    """Where the pilots disagree about the modes, the tempering candidates' pilots (added to ``pilots``),
    racing only against each other; the reference pilot then."""
    tempering = [(spec, s) for spec, s in candidates if spec.auto == "modes"]
    run.say(f"auto: the pilots' chains disagree about the modes (chain means {modes['gap']:.1f} within-chain "
            f"sds and {modes['z']:.1f} standard errors apart, above {constants.MODE_GAP:g} and "
            f"{constants.MODE_Z:g}): piloting tempering too")  # fmt: skip
    race = Race(run.chain_draws, cap)  # tempering races only against tempering
    for spec, settings in tempering:
        pilots.append(_pilot(run, spec, settings, race))
        race.enter(pilots[-1])
    return _agreement(pilots)


def _choice(
    run: AutoRun, pilots: list[Pilot], reference: Pilot | None, modes: dict[str, Any], skipped: dict[str, str]
) -> tuple[Pilot | None, list[Pilot], str, float]:
    """The pilot chosen (None: none gave a usable estimate), among the eligible; the reason said, and the
    seconds so far (charged to the result)."""
    chain_draws, say = run.chain_draws, run.say
    eligible = [
        p for p in pilots if p.result is not None and not p.note and np.isfinite(p.projected(chain_draws))
    ]
    if modes["disagree"] and any(p.role == "modes" for p in eligible):
        eligible = [p for p in eligible if p.role == "modes"]
        why = "the pilots disagree about the modes, so only tempering is trusted; the highest projected ESS/s"
    elif modes["disagree"]:
        why = (
            "the pilots disagree about the modes and no tempering method could run "
            f"({'; '.join(skipped.values()) or 'none'}); the highest projected ESS/s, "
            "which may miss a mode"
        )
    else:
        agreeing = f", among pilots agreeing with {reference.method}'s" if reference is not None else ""
        why = f"the highest projected ESS/s with warm-up and set-up charged{agreeing}"
    best = _choose(eligible, chain_draws)
    if best is not None and best is not _choose(eligible, chain_draws, margin=1.0):
        margin = constants.NUTS_MARGIN
        why += f"; NUTS kept, as no other projected {margin:g}x its ESS/s (within the pilots' error)"
    pilot_seconds = time.perf_counter() - run.start
    others = ", ".join(
        f"{p.name} {p.projected(chain_draws):.3g}" for p in pilots if p is not best and p.result is not None
    )
    if best is None:
        line = f"auto: no pilot gave a usable estimate, so {_method(best)} runs"
    else:
        line = (f"auto: chose {best.name} (projected {best.projected(chain_draws):.3g} ESS/s"
                f"{'; ' + others if others else ''}): {why}")  # fmt: skip
    rows = [p.row(chain_draws, _is_chosen(p, best, pilots)) for p in pilots]
    for row in rows:
        say("auto pilot: " + pilot_line(row))
    say(line + f"; {pilot_seconds:.1f} s so far (the shared warm-up, set-ups, pilots) are charged, less the "
        "chosen pilot's draws, which its full run keeps")  # fmt: skip
    return best, eligible, line, pilot_seconds


def _checked(
    run: AutoRun, best: Pilot | None, eligible: list[Pilot], line: str, pilot_seconds: float
) -> tuple[Pilot | None, str, float, list[dict[str, Any]]]:
    """A kernel chosen over NUTS checked in its full run's first draws (:func:`_check_choice`), and chosen
    again while a check fails: the choice, its reason, the seconds so far, and the checks."""
    checks = []
    while (
        best is not None
        and best.role != "own-warmup"
        and (run.executor is None or isinstance(run.executor, SerialExecutor))
    ):
        check = _check_choice(run, best, eligible)
        checks.append(check)
        if check["held"]:
            break
        best = _choose([p for p in eligible if not p.note], run.chain_draws)
        line += f"; then {check['note']}"
        pilot_seconds = time.perf_counter() - run.start
    return best, line, pilot_seconds, checks


def _method(best: Pilot | None) -> str:
    """The chosen pilot's method; Stan's NUTS where none was chosen."""
    if best is not None:
        return best.method
    return next(spec.name for spec in METHODS.values() if spec.auto == "own-warmup")


def _is_chosen(pilot: Pilot, best: Pilot | None, pilots: list[Pilot]) -> bool:
    """Whether ``pilot`` is the one whose method runs in full: ``best``; where none was chosen, the first
    NUTS pilot (NUTS runs then)."""
    if best is not None:
        return pilot is best
    return pilot is next((p for p in pilots if p.role == "own-warmup"), None)


def _sampler(best: Pilot | None, result: SampleResult) -> str:
    """The sampler that ran in full, in words: the chosen pilot's label (which NUTS metric, say), else
    the run's."""
    return best.label if best is not None else method_label(result.config)
