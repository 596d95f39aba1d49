"""The choice among the pilots: the one of highest projected ESS per second (NUTS's unless another
beats it by :data:`~stanaccel.sampling.auto.constants.NUTS_MARGIN`), among pilots that agree with the
reference pilot's posterior means; what the pilots' draws show (modes, a funnel); and the check of a
kernel chosen over NUTS, in its full run's first draws."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.stats import norm

from stanaccel.diagnostics import reference_z_scores, worst_rhat
from stanaccel.diagnostics.funnel import Funnel, find_funnel
from stanaccel.diagnostics.modes import mode_gap
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.draws import _unconstrained
from stanaccel.sampling.auto.full_run import _full_config
from stanaccel.sampling.auto.race import Pilot, Race, _ess_per_draw, _Stop
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.run import run_sampler


def _choose(eligible: list[Pilot], chain_draws: int, margin: float | None = None) -> Pilot | None:
    """The pilot of highest projected ESS/s; NUTS's unless another projects ``margin`` (by default
    :data:`NUTS_MARGIN`) times its ESS/s."""
    margin = constants.NUTS_MARGIN if margin is None else margin
    best = max(eligible, key=lambda p: p.projected(chain_draws), default=None)
    nuts = next((p for p in eligible if p.role == "own-warmup"), None)
    if best is None or nuts is None:
        return best
    return nuts if best.projected(chain_draws) < margin * nuts.projected(chain_draws) else best


def _check_choice(run: AutoRun, best: Pilot, eligible: list[Pilot]) -> dict[str, Any]:
    """Run the chosen kernel to :data:`CHECK_SHARE` of its draws, then check the choice with its ESS so far.

    The draws are the start of its full run (checkpointed, as its pilot's).
    Where their ESS per draw makes another eligible pilot the choice, the
    chosen pilot is marked (its note) and its ESS per draw is the one
    measured; the caller chooses again. Returns what was checked.
    """
    auto, say, chain_draws = run.auto, run.say, run.chain_draws
    draws = max(2 * auto.pilot_draws, int(constants.CHECK_SHARE * auto.draws))
    check = {"method": best.method, "draws": min(draws, auto.draws), "pilot_ess_per_draw": best.ess_per_draw,
             "ess_per_draw": None, "rhat": None, "held": True, "note": ""}  # fmt: skip
    if draws >= auto.draws:
        return check
    start = time.perf_counter()
    config = _full_config(run, best, best.method)
    stop = _Stop(Race(chain_draws, float("inf")), draws, auto.chains, best.warmup_seconds, False)
    result = run_sampler(config, run.model, run.data, run.adaptation, seed=run.seed, seeds=run.seeds,
                         charged={}, describe=False, checkpoint=best.checkpoint, stop=stop)  # fmt: skip
    draws_so_far = _unconstrained(result)
    measured, rhat = _ess_per_draw(draws_so_far), worst_rhat(draws_so_far)
    check.update(ess_per_draw=measured, rhat=rhat, seconds=time.perf_counter() - start)
    piloted = best.ess_per_draw
    best.ess_per_draw = measured
    others = [p for p in eligible if not p.note and p is not best]
    unmixed = rhat > constants.CHECK_RHAT and bool(others)
    again = _choose(others, chain_draws) if unmixed else _choose([best, *others], chain_draws)
    if again is best:
        best.ess_per_draw = piloted  # the pilot's row keeps its pilot's figures
        say(f"auto: {best.method} after {draws} draws per chain: ESS/draw {measured:.3g} (its pilot's "
            f"{piloted:.3g}), R-hat {rhat:.3g}; the choice holds")  # fmt: skip
        return check
    check["held"] = False
    if unmixed:
        check["note"] = (
            f"after {draws} draws per chain {best.method}'s chains disagree (R-hat {rhat:.3g}, above "
            f"{constants.CHECK_RHAT:g}; ESS/draw {measured:.3g}, its pilot's {piloted:.3g})"
        )
    else:
        check["note"] = (
            f"after {draws} draws per chain {best.method}'s ESS/draw was {measured:.3g}, not its pilot's "
            f"{piloted:.3g}: projected {best.projected(chain_draws):.3g} ESS/s, below {again.name}'s "
            f"{again.projected(chain_draws):.3g}"
        )
    best.note = f"checked in its full run: {check['note']}"
    say(f"auto: {check['note']}; {again.name} runs instead (the {check['seconds']:.1f} s spent are "
        "charged)")  # fmt: skip
    return check


def pilot_line(row: dict[str, Any]) -> str:
    """One row of the pilot table (``reports["auto"]["pilots"]``) as the run prints it."""

    def num(value):
        return (
            "-" if value is None or (isinstance(value, float) and not np.isfinite(value)) else f"{value:.3g}"
        )

    name = row.get("name", row["method"])
    return (
        f"{name:<5} warm-up {row['warmup'] or '-'} {num(row['warmup_s'])} s, set-up "
        f"{num(row['setup_s'])} s, ESS/draw {num(row['pilot_ess_per_draw'])}, "
        f"s/draw {num(row['s_per_draw'])}, pilot {num(row['pilot_s'])} s, "
        f"projected {num(row['projected_ess_per_s'])} ESS/s"
        + (f", slowest {row['slowest']}" if row.get("slowest") else "")
        + (" (the funnel)" if row.get("slowest_in_funnel") else "")
        + (" (chosen)" if row["chosen"] else "")
        + (f" [{row['note']}]" if row["note"] else "")
    )


def _agreement(pilots: list[Pilot]) -> Pilot | None:
    """Mark each pilot whose posterior means differ from the reference pilot's beyond a Bonferroni z limit.

    The reference is the NUTS pilot; where NUTS was dropped, the finished
    pilot on the full density ("warm") of the highest ESS per draw; where
    those were dropped too, the one of them with the most draws before it
    was, if it has :data:`PROBE_DRAWS` per chain (fewer give no MCSE to
    judge by: 9 draws per chain of a dropped HMC probe put a correct ``dc``
    pilot 5 MCSE off). Returns it (None: no check).
    """
    drawn = [p for p in pilots if p.result is not None]
    full = [p for p in pilots if p.role == "warm" and (p.partial or p.result) is not None]
    stopped = [p for p in full if p.result is None and p.partial.num_draws >= constants.PROBE_DRAWS]
    reference = (
        next((p for p in drawn if p.role == "own-warmup"), None)
        or max((p for p in full if p.result is not None), key=lambda p: p.ess_per_draw, default=None)
        or max(stopped, key=lambda p: p.partial.num_draws, default=None)
    )
    if reference is None:
        return None
    mine = (reference.result or reference.partial).to_inference_data()
    others = [p for p in drawn if p is not reference]
    for pilot in others:
        z = reference_z_scores(pilot.result.to_inference_data(), mine)[0]
        limit = norm.ppf(1 - constants.AGREEMENT_P / (2 * max(z.size, 1) * max(len(others), 1)))
        pilot.z_max = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else None
        if pilot.z_max is not None and pilot.z_max > limit and not pilot.note:
            pilot.note = f"disagrees with the {reference.method} pilot (|z| {pilot.z_max:.1f} > {limit:.1f})"
    return reference


def _modes(pilots: list[Pilot]) -> dict[str, Any]:
    """Whether the pilots' chains disagree about the modes (:func:`~stanaccel.diagnostics.modes.mode_gap`)."""
    chains = [chain for p in pilots if p.result is not None for chain in _unconstrained(p.result)]
    gap, z = mode_gap(chains, constants.MODE_ESS, constants.MODE_GAP, constants.MODE_Z)
    return {"gap": gap, "z": z, "limit": constants.MODE_GAP, "z_limit": constants.MODE_Z,
            "disagree": bool(gap > constants.MODE_GAP and z > constants.MODE_Z)}  # fmt: skip


def _funnel(pilots: list[Pilot], reference: Pilot | None, names: list[str], scales) -> Funnel | None:
    """A funnel in the reference pilot's draws (else the longest pilot's); marks each pilot's slowest
    coordinate with its name, and whether it is in the funnel."""
    drawn = [p for p in pilots if p.result is not None]
    source = reference if reference is not None and reference.result is not None else None
    source = source or max(drawn, key=lambda p: p.result.num_draws, default=None)
    funnel = None if source is None else find_funnel(_unconstrained(source.result), names, scales)
    members = set() if funnel is None else {funnel.scale, *funnel.coupled}
    for pilot in drawn:
        if pilot.slowest is not None:
            pilot.slowest_name = names[pilot.slowest]
            pilot.in_funnel = pilot.slowest_name in members
    return funnel
