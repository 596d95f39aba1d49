"""What Stan's service calls take and give, shared by the modules that call them.

:mod:`stanaccel.stan.nuts` runs each chain in one call, :mod:`stanaccel.stan.chunks`
in checkpointed pieces; both build a chain's settings and inits here, and read
the sampler columns by these names. :mod:`stanaccel.stan.optimize` and
:mod:`stanaccel.stan.pathfinder` share the L-BFGS settings
(:class:`LbfgsSettings`); every service runs in threads by :func:`run_threads`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from stanaccel.stan.data import data_to_json
from stanaccel.stan.model import StanModel, unflatten

# Stan's sampler columns and the names ArviZ uses for them.
SAMPLER_COLUMNS = {
    "lp__": "lp",
    "accept_stat__": "acceptance_rate",
    "stepsize__": "step_size",
    "treedepth__": "tree_depth",
    "n_leapfrog__": "n_steps",
    "divergent__": "diverging",
    "energy__": "energy",
}


@dataclass
class LbfgsSettings:
    """Settings of Stan's L-BFGS, shared by its optimize and Pathfinder services, with CmdStan's defaults."""

    seed: int = 1
    init_radius: float = 2.0
    history_size: int = 5
    init_alpha: float = 0.001
    tol_obj: float = 1e-12
    tol_rel_obj: float = 1e4
    tol_grad: float = 1e-8
    tol_rel_grad: float = 1e7
    tol_param: float = 1e-8
    iterations: int = 2000

    service: ClassVar[str] = "L-BFGS"
    """The service's name in error messages."""
    counts: ClassVar[tuple[str, ...]] = ("history_size", "iterations")
    """The settings that must be at least 1."""

    def check(self) -> None:
        """Raise ValueError naming the first setting out of range."""
        for name in self.counts:
            if getattr(self, name) < 1:
                raise ValueError(f"{self.service}'s {name} must be at least 1, not {getattr(self, name)}")
        if not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be in [0, 2**32), not {self.seed}")


def lbfgs_settings(config: LbfgsSettings, init: str) -> dict:
    """The L-BFGS part of an ``Optimization`` or ``PathfinderPath`` service call's settings."""
    return {
        "init": init,
        "seed": int(config.seed),
        "init_radius": float(config.init_radius),
        "history_size": int(config.history_size),
        "init_alpha": float(config.init_alpha),
        "tol_obj": float(config.tol_obj),
        "tol_rel_obj": float(config.tol_rel_obj),
        "tol_grad": float(config.tol_grad),
        "tol_rel_grad": float(config.tol_rel_grad),
        "tol_param": float(config.tol_param),
        "num_iterations": int(config.iterations),
    }


def chain_settings(config, chain: int, init: str, metric: str, step_size: float) -> dict:
    """The settings of one chain's service call (``NutsChain``).

    ``config`` is a :class:`~stanaccel.stan.nuts.NutsSettings`.
    """
    return {
        "metric": config.metric,
        "adapt": bool(config.adapt and config.warmup > 0),
        "init": init,
        "inv_metric": metric,
        "seed": int(config.seed),
        "chain": chain + 1,
        "init_radius": float(config.init_radius),
        "num_warmup": int(config.warmup),
        "num_samples": int(config.draws),
        "num_thin": int(config.thin),
        "stepsize": float(step_size),
        "stepsize_jitter": float(config.step_size_jitter),
        "max_depth": int(config.max_depth),
        "delta": float(config.delta),
        "gamma": float(config.gamma),
        "kappa": float(config.kappa),
        "t0": float(config.t0),
        "init_buffer": int(config.init_buffer),
        "term_buffer": int(config.term_buffer),
        "window": int(config.window),
    }


def init_texts(model: StanModel, inits: Any, chains: int) -> list[str]:
    """Stan JSON init text per chain: none, one dict for all, a dict per chain, or unconstrained points."""
    if inits is None:
        return ["{}"] * chains
    if isinstance(inits, Mapping):
        return [data_to_json(inits)] * chains
    if isinstance(inits, Sequence) and inits and isinstance(inits[0], Mapping):
        if len(inits) != chains:
            raise ValueError(f"got {len(inits)} init dicts for {chains} chains")
        return [data_to_json(i) for i in inits]
    points = np.atleast_2d(np.asarray(inits, dtype=float))
    if points.shape[-1] != model.dim:
        raise ValueError(f"unconstrained inits have {points.shape[-1]} columns, the model has {model.dim}")
    if points.shape[0] == 1:
        points = np.repeat(points, chains, axis=0)
    if points.shape[0] != chains:
        raise ValueError(f"got {points.shape[0]} unconstrained inits for {chains} chains")
    variables = model.variables()
    texts = []
    for point in points:
        values = unflatten(model.param_constrain(point), variables)
        texts.append(data_to_json(values))
    return texts


def run_threads(runs: list, label: str, total: int, progress: bool, initial: list[int] | None = None) -> bool:
    """Run service objects (``NutsChain``, ``PathfinderPath``, ``Optimization``) in parallel threads.

    Each ``run.run()`` releases the GIL, so the runs use a core each. A bar
    per run shows its iterations (of ``total``; from ``initial`` for runs
    resumed from a checkpoint) on a terminal. On Ctrl-C every run is asked
    to stop and this returns True once they have. After a stop signal
    (:func:`stanaccel.signals.refuse_after_stop`) none starts:
    ``KeyboardInterrupt`` is raised.
    """
    import threading

    from stanaccel.progress import ChainBars
    from stanaccel.signals import refuse_after_stop

    refuse_after_stop(f"Stan's {label}")
    threads = [threading.Thread(target=run.run, daemon=True) for run in runs]
    bars = ChainBars([total] * len(runs), label, progress, initial=initial, unit="it")
    try:
        for thread in threads:
            thread.start()
        alive = threads
        while alive:
            alive[0].join(0.02)  # back as soon as it ends: short runs (L-BFGS's, in ms) wait no poll out
            bars.update([r.iterations() for r in runs])
            alive = [t for t in alive if t.is_alive()]
        return False
    except KeyboardInterrupt:
        for run in runs:
            run.request_stop()
        for t in threads:
            if t.ident is not None:  # a stop while they start: the rest never ran (nor run once exited)
                t.join()
        return True
    finally:
        bars.close()
