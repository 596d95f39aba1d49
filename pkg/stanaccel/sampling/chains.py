"""A chain of a run as a task an executor runs elsewhere, with the same draws as a local run.

The task function lives in the package (a Dask worker or a spawned process
imports it by name) and takes one picklable task description. What a task
holds is rebuilt where it runs: a Stan model from its program and data, the program
loaded from the compile cache (:meth:`stanaccel.stan.StanModel.__reduce__`),
never compiled per task; the kernel from the kernel factory. Seeds travel
explicitly: a chain task holds its chain's ``SeedSequence`` child, the one
:func:`stanaccel.kernels.run_chains` would have given chain c of the whole
run, so the draws are those of a local run with the same seed, bit for bit.

Large arrays (the draws and per-draw statistics) are written by the task to
the executor's ``scratch`` folder, when it has one, and come back as a path
(:class:`SpilledRun`); the caller reads them back with :func:`restore`. A
study's sampler runs use the same (:mod:`stanaccel.sampling.tasks`).
"""

from __future__ import annotations

import copy
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.executors import stop_requested
from stanaccel.kernels import KernelRun, run_chains
from stanaccel.kernels.driver import quantity_fields

ARRAYS = ("positions", "accepted", "acceptance_probability", "divergent", "failed")
OPTIONAL = ("recorded", "quantities_failed")  # arrays a run may lack (None)
GROUPS = ("constrained", "log_likelihood")  # dicts of arrays, stored as "group.name"


class LostChainsWarning(UserWarning):
    """Chains of a stopped run on an executor were lost: their worker processes died."""


@dataclass
class SpilledRun:
    """A :class:`KernelRun` whose arrays were written to ``path`` (``.npz``); the rest is kept here."""

    path: str
    fields: dict[str, Any]

    def load(self) -> KernelRun:
        """The run, its arrays read back from the file (which is then removed)."""
        with np.load(self.path) as stored:
            arrays = {k: stored[k] for k in stored.files}
        Path(self.path).unlink(missing_ok=True)
        groups = {
            group: {k.removeprefix(f"{group}."): v for k, v in arrays.items() if k.startswith(f"{group}.")}
            for group in GROUPS
        }
        return KernelRun(
            **{k: arrays[k] for k in ARRAYS},
            **{k: arrays.get(k) for k in OPTIONAL},
            **{group: values or None for group, values in groups.items()},
            **self.fields,
        )


def spill(run: KernelRun, scratch: str | Path | None) -> KernelRun | SpilledRun:
    """Write the run's arrays to a new file in ``scratch`` and return where; without one, the run."""
    if scratch is None:
        return run
    arrays = {k: getattr(run, k) for k in ARRAYS}
    arrays.update({k: getattr(run, k) for k in OPTIONAL if getattr(run, k) is not None})
    for group in GROUPS:
        arrays.update({f"{group}.{k}": v for k, v in (getattr(run, group) or {}).items()})
    path = Path(scratch) / f"run-{uuid.uuid4().hex}.npz"
    np.savez(path, **arrays)
    kept = {
        k: getattr(run, k) for k in KernelRun.__dataclass_fields__ if k not in (*ARRAYS, *OPTIONAL, *GROUPS)
    }
    return SpilledRun(str(path), kept)


def restore(run: KernelRun | SpilledRun) -> KernelRun:
    """A run as a task returned it, read back if it was spilled to a file."""
    return run.load() if isinstance(run, SpilledRun) else run


@dataclass
class ChainTask:
    """One chain of a kernel run: chain ``chain`` of :func:`run_chains` on the factory's kernels.

    Attributes
    ----------
    factory : KernelFactory
        Builds the chain's kernel where the task runs (its model pickles by program and data).
    start : ndarray (dim,)
    draws : int
    chain : int
        The chain's index in the whole run (its kernel is ``factory(chain)``).
    seed : SeedSequence
        ``SeedSequence(seed).spawn(chains)[chain]``: the stream of chain ``chain`` in a local run.
    name : str
    scratch : str or None
        Where the task writes its draws (None: they come back whole).
    thin : int
    stop_file : str or None
        The executor's :attr:`~stanaccel.executors.Executor.stop_file`: when it
        is there, the chain ends at its next draw and returns what it has.
    began_file : str or None
        Made when the chain begins (beside the stop file): Dask runs a task
        again when its worker died, and the task run again after a stop
        tells by it that the chain had begun, its draws lost with the worker.
    """

    factory: Any
    start: np.ndarray
    draws: int
    chain: int
    seed: np.random.SeedSequence
    name: str
    scratch: str | None = None
    thin: int = 1
    stop_file: str | None = None
    began_file: str | None = None


@dataclass
class LostChain:
    """What a chain task run again after a stop returns where its chain had begun: its worker died."""

    chain: int


@dataclass
class ChainOutcome:
    """What a chain task returns: its run (or where its arrays are) and the densities it evaluated."""

    run: KernelRun | SpilledRun
    densities: list[dict[str, Any]] = field(default_factory=list)


def run_chain(task: ChainTask) -> ChainOutcome | LostChain | None:
    """Run one chain of a kernel run (see :class:`ChainTask`), where the executor puts it.

    None for a chain whose run was stopped before it began (a task that waited for a free worker);
    a :class:`LostChain` where it had begun, on a worker that died (Dask then runs its task again).
    """
    began = None if task.began_file is None else Path(task.began_file)
    if stop_requested(task.stop_file, every=0)():
        return LostChain(task.chain) if began is not None and began.exists() else None
    if began is not None:
        began.touch()
    factory = copy.copy(task.factory)  # its own record of densities, also where tasks share one factory
    factory.densities = []
    run = run_chains(
        lambda _: factory(task.chain),
        np.asarray(task.start)[None],
        task.draws,
        chain_seeds=[task.seed],
        name=task.name,
        thin=task.thin,
        stop=stop_requested(task.stop_file),
    )
    return ChainOutcome(spill(run, task.scratch), factory.densities)


def run_chains_on(
    executor, factory, starts: np.ndarray, draws: int, *, seed: int, name: str, constrain=None, thin: int = 1
):
    """:func:`run_chains` with each chain a task of ``executor``: the same draws as a local run.

    Returns the combined :class:`KernelRun` (its wall time that of the whole
    map, tasks' start-up included) and each chain's densities, in chain order.
    A stop (Ctrl-C, SIGTERM, SIGHUP) asks the chains to end through the
    executor's stop file: the run then keeps, as a local one does, the
    chains that made draws, each cut to the fewest draws of any, and says
    it was interrupted. Where the executor has no stop file, or the chains
    do not end in time (:data:`~stanaccel.executors.STOP_GRACE`),
    ``KeyboardInterrupt`` is raised and nothing is kept. Chains whose
    workers died (their draws with them) are named in a warning, or in the
    ``KeyboardInterrupt``'s message where no chain has draws.
    """
    chains = len(starts)
    sequences = np.random.SeedSequence(seed).spawn(chains)
    scratch = None if executor.scratch is None else str(executor.scratch)
    stop_file = None if executor.stop_file is None else str(executor.stop_file)
    began = [None] * chains
    if stop_file is not None:
        run_id = uuid.uuid4().hex
        began = [str(Path(stop_file).with_name(f"began-{run_id}-{c}")) for c in range(chains)]
    tasks = [
        ChainTask(factory, starts[c], draws, c, sequences[c], name, scratch, thin, stop_file, began[c])
        for c in range(chains)
    ]
    start = time.perf_counter()
    try:
        outcomes = executor.map(run_chain, tasks, keep_on_stop=True)
    finally:
        for path in began:
            if path is not None:
                Path(path).unlink(missing_ok=True)
    wall = time.perf_counter() - start
    lost = [outcome.chain for outcome in outcomes if isinstance(outcome, LostChain)]
    outcomes = [outcome for outcome in outcomes if isinstance(outcome, ChainOutcome)]  # None: had not begun
    runs = [restore(outcome.run) for outcome in outcomes]
    if len(runs) < chains or any(r.interrupted for r in runs):
        runs = _cut_to_the_shortest([r for r in runs if r.positions.shape[1] > 0], lost)
    run = combine(runs, wall)
    if constrain is not None:  # after the map, as run_chains does, and charged as it charges them
        began = time.perf_counter()
        quantities = quantity_fields(constrain(run.positions))
        run = replace(run, **quantities, wall_seconds=run.wall_seconds + time.perf_counter() - began)
    densities = [d for outcome in outcomes for d in outcome.densities]
    return run, densities


def _cut_to_the_shortest(runs: list[KernelRun], lost: list[int]) -> list[KernelRun]:
    """Stopped chains, each cut to the draws they all have (as :func:`run_chains` keeps them).

    ``lost``: the chains whose workers died, their draws with them (a
    warning names them; the stop's message, where no chain is left).
    """
    died = ""
    if len(lost) == 1:
        died = f"the worker process of chain {lost[0]} died (killed, or out of memory), its draws with it"
    elif lost:
        which = ", ".join(map(str, lost))
        died = (
            f"the worker processes of chains {which} died (killed, or out of memory), their draws with them"
        )
    if not runs:
        raise KeyboardInterrupt(died or "the chains were stopped before their first draw")
    if died:
        warnings.warn(f"{died}; the other chains' draws are kept", LostChainsWarning, stacklevel=3)
    kept = min(r.positions.shape[1] for r in runs)

    def cut(run: KernelRun) -> KernelRun:
        groups = {g: {k: v[:, :kept] for k, v in (getattr(run, g) or {}).items()} or None for g in GROUPS}
        optional = {k: None if getattr(run, k) is None else getattr(run, k)[:, :kept] for k in OPTIONAL}
        return replace(run, **{k: getattr(run, k)[:, :kept] for k in ARRAYS}, **optional, **groups)

    def dropped(run: KernelRun) -> int:
        return run.dropped_draws + run.positions.shape[0] * (run.positions.shape[1] - kept)

    return [replace(cut(run), interrupted=True, dropped_draws=dropped(run)) for run in runs]


def combine(runs: list[KernelRun], wall_seconds: float) -> KernelRun:
    """One run of the chains of ``runs`` (each of one or more chains), in their order."""
    first = runs[0]

    def stack(name):
        return np.concatenate([getattr(r, name) for r in runs], axis=0)

    return KernelRun(
        **{k: stack(k) for k in ARRAYS},
        evaluations=stack("evaluations"),
        failed_proposals=stack("failed_proposals"),
        chain_seconds=stack("chain_seconds"),
        wall_seconds=wall_seconds,
        exact=first.exact,
        sampler=first.sampler,
        summaries=[s for r in runs for s in r.summaries],
        interrupted=any(r.interrupted for r in runs),
        dropped_draws=sum(r.dropped_draws for r in runs),
        recorded=None if first.recorded is None else stack("recorded"),
    )
