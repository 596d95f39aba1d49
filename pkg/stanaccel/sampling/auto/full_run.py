"""The full run of the chosen method: Stan's NUTS from its pilot's warm-up state, or a kernel method
continuing its pilot's chains with the step it tuned; the shared warm-up and the pilots charged."""

from __future__ import annotations

from stanaccel.executors import SerialExecutor
from stanaccel.sampling.auto import constants
from stanaccel.sampling.auto.race import Pilot, _tuned_step
from stanaccel.sampling.auto.record import AutoRun
from stanaccel.sampling.config import DEFAULT_NUTS_WARMUP, make_config
from stanaccel.sampling.methods import METHODS
from stanaccel.sampling.result import SampleResult
from stanaccel.sampling.run import run_nuts, run_sampler
from stanaccel.sampling.warmup import BORROWED


def _full_nuts(run: AutoRun, best: Pilot | None, method: str, pilot_seconds: float) -> SampleResult:
    """Stan's NUTS at full length: from its pilot's warm-up state, continuing its pilot's draws.

    Without a pilot (none gave a usable estimate) it runs with its own warm-up.
    """
    model, auto, say, seed, seeds = run.model, run.auto, run.say, run.seed, run.seeds
    name = model.name.removesuffix("_model")
    config = make_config(method, {"chains": auto.chains, "draws": auto.draws})
    if best is None or best.state is None:
        result = run_nuts(config, model, name, seed, seeds, None, run.progress, say, run.checkpoint)
        result.charged_seconds["auto pilots"] = pilot_seconds
        return result
    say(f"{method}: its full run continues the {auto.chains} chains of its pilot, with no warm-up of its own")
    result = run_nuts(config, model, name, seed, seeds, warmup_from=best.state, progress=run.progress,
                      checkpoint=best.checkpoint, checkpoint_draws=auto.pilot_draws)  # fmt: skip
    result.charged_seconds.pop(BORROWED, None)
    kept = best.result.run.wall_seconds  # the pilot's draws, in the full run's time
    result.charged_seconds["warmup"] = best.warmup_seconds
    if best.setup_seconds:  # its step size adapted alone, after a cheap warm-up
        result.charged_seconds["step size"] = best.setup_seconds
    spent = pilot_seconds - best.warmup_seconds - best.setup_seconds - kept
    result.charged_seconds["auto pilots"] = max(spent, 0.0)
    result.adaptation = best.state
    return result


def _full_config(run: AutoRun, best: Pilot, method: str):
    """The settings of a chosen kernel's full run: its pilot's, at full length, with the step it tuned."""
    adaptation, auto = run.adaptation, run.auto
    settings = {**best.settings, "chains": auto.chains, "draws": auto.draws}
    # The warm-up that ran, so that the settings say it (not the method's default).
    settings["warmup"] = (
        adaptation.warmup if adaptation.warmup in constants.WARMUPS_TRIED else DEFAULT_NUTS_WARMUP
    )
    return make_config(method, {**settings, **_tuned_step(METHODS[method], best.result.config)})


def _full_run(run: AutoRun, best: Pilot | None, method: str, pilot_seconds: float) -> SampleResult:
    """The chosen method at full length: a kernel method continues its pilot's chains, with its tuned step."""
    spec = METHODS[method]
    if spec.auto == "own-warmup":
        return _full_nuts(run, best, method, pilot_seconds)
    adaptation, auto, say, executor = run.adaptation, run.auto, run.say, run.executor
    warm_seconds = run.warm_seconds
    reused = _tuned_step(spec, best.result.config)
    config = _full_config(run, best, method)
    own = best.setup_seconds - best.result.charged_seconds.get("tuning", 0.0)
    local = executor is None or isinstance(executor, SerialExecutor)
    kept = best.result.run.wall_seconds if local else 0.0  # the pilot's draws, in the full run's time
    charged = {"warmup": warm_seconds, "auto pilots": max(pilot_seconds - warm_seconds - own - kept, 0.0)}
    if local:
        say(f"{method}: its full run continues the {auto.chains} chains of its pilot")
    result = run_sampler(config, run.model, run.data, adaptation, seed=run.seed, seeds=run.seeds,
                         charged=charged, say=say, progress=run.progress,
                         checkpoint=best.checkpoint if local else run.checkpoint,
                         executor=executor)  # fmt: skip
    result.sources.update({key: "auto pilot" for key in reused})
    result.adaptation = adaptation.warmup_state
    if adaptation.report:
        result.reports["warmup"] = adaptation.report
    return result
