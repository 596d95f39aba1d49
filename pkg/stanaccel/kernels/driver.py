"""Run a kernel for several chains and collect draws, statistics and cost.

Chains run in parallel threads when each has a kernel of its own (pass a
factory ``make_kernel(chain) -> kernel``), which pays off when the density
releases the GIL (Stan does); a single shared kernel runs its chains in turn,
so its densities' evaluation counters stay exact per chain. Each chain owns a
``numpy.random.Generator`` spawned from one seed. Ctrl-C stops every chain and
keeps the draws made so far.

A long run shows a progress bar per chain (``progress``) and, given a
``checkpoint`` folder, writes each chain's state, generator state and draws
there every few seconds and when it stops (:mod:`stanaccel.kernels.checkpoint`);
the same call after a Ctrl-C, a kill or a crash continues each chain from its
checkpoint to the same draws as a run never stopped.

A chain whose start point has no defined density stops the run with an
:class:`~stanaccel.kernels.state.UndefinedStartError` that names the chain.
A chain whose proposals all fail (the density undefined at each, so every
one is rejected) would otherwise run on silently with acceptance 0: after
``FAILURES_BEFORE_WARNING`` failed steps in a row the driver warns, once per
chain, with a :class:`FailingDensityWarning`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from stanaccel.densities import evaluations, kernel_densities
from stanaccel.kernels import checkpoint as checkpoints
from stanaccel.kernels.checkpoint import ChainCheckpoint, fingerprint
from stanaccel.kernels.state import UndefinedStartError
from stanaccel.progress import ChainBars
from stanaccel.results import Quantities, Result
from stanaccel.signals import refuse_after_stop

FAILURES_BEFORE_WARNING = 100
"""Failed steps in a row after which a chain warns. A healthy chain near the edge
of its support fails now and then; a hundred failures in a row (a chance of
about 1e-10 at a failure rate of 0.8) say that the chain cannot move."""


CHECKPOINT_SECONDS = 5.0
"""Seconds between a chain's checkpoints: a kill loses at most this much of each chain's work.
``$STANACCEL_CHECKPOINT_SECONDS`` overrides it where ``run_chains`` is not called directly
(a workflow step, ``stanaccel sample``)."""


class FailingDensityWarning(RuntimeWarning):
    """A chain's proposals keep failing: the density is undefined at each, so the chain is stuck."""


class CheckpointWarning(UserWarning):
    """A checkpoint was found but not resumed from (another run's, or unreadable)."""


STEP_SETTINGS = ("step_size", "scale")
"""The attributes, named as the settings, by which a kernel sets how far a proposal moves (HMC's and
MALA's step size, the random walk's scale)."""


def warn_failing(chain: int, failures: int, kernel: Any = None, info: Any = None) -> None:
    """Warn that ``chain`` has failed ``failures`` steps in a row, and why that happens.

    Where the last failure is a proposal that moved (``info``; an HMC trajectory of one leapfrog step
    or more) from the chain's point, where the density is defined, and ``kernel`` moves by a step size
    or scale (:data:`STEP_SETTINGS`), that setting is named first: a step far too large (a warm-up of
    a few iterations leaves one) lands where the density overflows or is undefined, every time.
    """
    head = (
        f"chain {chain}: {failures} proposals in a row failed (the log density or its gradient was "
        "undefined at each), so the chain is not moving."
    )
    moved = info is not None and info.details.get("n_steps", 1) > 0
    name = next((n for n in STEP_SETTINGS if isinstance(getattr(kernel, n, None), int | float)), None)
    if moved and name is not None:
        size = float(getattr(kernel, name))
        message = (
            f"{head} Each moved from the chain's point, where the density is defined, to one where it is "
            f"not (it overflowed to infinity, was NaN, or the program rejected it): the likeliest cause is a "
            f"step size far too large for this posterior ({name} = {size:.3g}). Lower {name} (try "
            f"{size / 10:.3g}), or, where a warm-up adapted it, give the warm-up more iterations. Other "
            "causes: NaN or infinity in the data, a start point at the edge of the support."
        )
    else:
        message = (
            f"{head} Likely causes: NaN or infinity in the data, a start point at the edge of the support, "
            "or a step size or proposal scale too large."
        )
    warnings.warn(message, FailingDensityWarning, stacklevel=2)


@dataclass
class KernelRun(Result):
    """Draws and statistics of a kernel run, with (chain, draw) leading axes.

    A :class:`~stanaccel.results.Result`: ``draws()``, ``summary()``, ``metrics()``,
    ``to_inference_data()``, ``save(path)``.

    Attributes
    ----------
    positions : ndarray (chains, draws, dim)
        Unconstrained draws.
    accepted, acceptance_probability, divergent, failed : ndarray (chains, draws)
        Of the step that made each kept draw.
    evaluations : ndarray (chains,)
        Log-density and gradient evaluations of each chain (all its densities).
    failed_proposals : ndarray (chains,)
        Steps of each chain whose proposal failed (undefined density), thinned-out steps included.
    chain_seconds : ndarray (chains,)
    wall_seconds : float
    exact : bool
        Whether the kernel leaves the target exactly invariant.
    sampler : str
    summaries : list
        Each chain's kernel summary (tempering diagnostics), if the kernel has one.
    interrupted : bool
    dropped_draws : int
        Of a stopped run, the draws that chains made beyond the slowest chain's, all chains
        together: dropped to keep the chains equal.
    constrained : dict of ndarray (chains, draws, ...), optional
        The posterior group's named values (``constrain`` of the draws): for a
        Stan program its parameters, transformed parameters and generated
        quantities (:mod:`stanaccel.stan.quantities`); without, the posterior
        group is the unconstrained ``theta_unc``.
    log_likelihood : dict of ndarray (chains, draws, ...), optional
        The ``log_likelihood`` group (a Stan program's ``log_lik``).
    quantities_failed : ndarray (chains, draws) of bool, optional
        Draws whose generated quantities failed (a ``reject``): NaN in
        ``constrained`` and ``log_likelihood``; in ``sample_stats`` too.
    quantities_error : str, optional
        The first such draw's error message.
    recorded : ndarray (chains, draws, ...), optional
        What ``record`` kept per draw.
    resumed_draws : ndarray (chains,)
        Draws each chain took from its checkpoint (0: it started afresh).
    """

    positions: np.ndarray
    accepted: np.ndarray
    acceptance_probability: np.ndarray
    divergent: np.ndarray
    failed: np.ndarray
    evaluations: np.ndarray
    failed_proposals: np.ndarray
    chain_seconds: np.ndarray
    wall_seconds: float
    exact: bool
    sampler: str
    summaries: list = field(default_factory=list)
    interrupted: bool = False
    dropped_draws: int = 0
    constrained: dict[str, np.ndarray] | None = None
    log_likelihood: dict[str, np.ndarray] | None = None
    quantities_failed: np.ndarray | None = None
    quantities_error: str | None = None
    recorded: np.ndarray | None = None
    resumed_draws: np.ndarray | None = None

    def draws(self, *, concat_chains: bool = False) -> np.ndarray:
        """The draws as one array: (chains, draws, n), or (chains * draws, n) with ``concat_chains``.

        With ``constrained`` values, its arrays in the dict's order, each
        flattened in row-major order after the (chain, draw) axes (``n`` is
        the number of constrained scalars); without, the unconstrained
        ``positions`` (``n`` = dim).
        """
        return super().draws(concat_chains=concat_chains)

    def _metrics_arguments(self) -> dict[str, Any]:
        """The run's cost for ``metrics()``: wall time and all chains' density evaluations."""
        return {"wall_seconds": self.wall_seconds, "gradient_evaluations": int(self.evaluations.sum())}

    def inference_groups(self) -> dict[str, Any]:
        """Groups for ``stanaccel.diagnostics.to_inference_data``."""
        posterior = self.constrained if self.constrained is not None else {"theta_unc": self.positions}
        stats = {
            "acceptance_rate": self.acceptance_probability,
            "accepted": self.accepted,
            "diverging": self.divergent,
            "failed": self.failed,
        }
        attrs = {}
        if self.quantities_failed is not None:
            stats["quantities_failed"] = self.quantities_failed
            attrs["quantities_failed"] = int(self.quantities_failed.sum())
        if self.quantities_error:
            attrs["quantities_error"] = self.quantities_error
        return {
            "posterior": posterior,
            "log_likelihood": self.log_likelihood or {},
            "sample_stats": stats,
            "unconstrained_posterior": {"theta_unc": self.positions},
            "attrs": {
                "sampler": self.sampler,
                "exact": self.exact,
                "invariance": "exact" if self.exact else "approximate: does not leave the target invariant",
                "wall_seconds": self.wall_seconds,
                "evaluations": int(self.evaluations.sum()),
                "failed_proposals": int(self.failed_proposals.sum()),
                "interrupted": self.interrupted,
                **attrs,
            },
        }


def quantity_fields(values: Quantities | dict[str, np.ndarray] | None) -> dict[str, Any]:
    """The :class:`KernelRun` fields of what a ``constrain`` function returned (None: none)."""
    if values is None:
        return {}
    values = Quantities.of(values)
    return {
        "constrained": values.posterior,
        "log_likelihood": values.log_likelihood or None,
        "quantities_failed": values.failed,
        "quantities_error": values.error,
    }


def run_chains(
    kernel_or_factory,
    initial_positions: np.ndarray,
    n_draws: int,
    *,
    seed: int = 0,
    thin: int = 1,
    constrain: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None,
    record: Callable | None = None,
    name: str | None = None,
    progress: bool = False,
    checkpoint: str | Path | None = None,
    checkpoint_seconds: float | None = None,
    stop: Callable[[int, int], bool] | None = None,
    chain_seeds: list[np.random.SeedSequence] | None = None,
) -> KernelRun:
    """Run chains from ``initial_positions`` (chains, dim) for ``n_draws`` kept draws each.

    Parameters
    ----------
    kernel_or_factory : kernel, or callable chain -> kernel
        A factory gives each chain its own kernel and runs them in parallel threads.
    seed : int
        Seeds chain c with ``SeedSequence(seed).spawn(chains)[c]``.
    thin : int
        Keep every ``thin``-th state.
    constrain : callable, optional
        Maps the unconstrained draws (chains, draws, dim) to named constrained
        arrays (a dict: the posterior group), or to :class:`~stanaccel.results.Quantities`
        (with a ``log_likelihood`` group and failed draws), for example
        ``lambda x: stan_quantities(model, x, seed)`` (:mod:`stanaccel.stan.quantities`).
        Called once, on the kept draws, after the chains end; its time is in ``wall_seconds``, as
        Stan's NUTS computes transformed parameters and generated quantities inside its run.
    record : callable State -> ndarray, optional
        Something more to keep per draw, in ``KernelRun.recorded`` (chains, draws, ...):
        for example every tempering level, ``stanaccel.kernels.parallel_tempering.all_levels``.
    name : str, optional
        The sampler's name in the result and on the progress bars (default: the kernel's class).
    progress : bool
        One progress bar per chain (draws per second, time left) on stderr, if it is a terminal.
    checkpoint : path, optional
        A folder for each chain's checkpoint (:mod:`stanaccel.kernels.checkpoint`),
        written every ``checkpoint_seconds`` and when the chain ends or is
        stopped. Where the folder holds checkpoints of the same run (same
        chains, draws, thin, dimension, seed, kernel name and start points),
        each chain continues from its own, to the same draws as a run never
        stopped; a checkpoint of another run is ignored with a
        :class:`CheckpointWarning` and overwritten, as is a damaged one (it
        does not match its manifest). A resumed run's ``evaluations``,
        ``chain_seconds`` and ``wall_seconds`` count every segment: the
        draws taken from a checkpoint are charged the seconds they took when
        made (chains in parallel: the longest chain's; in turn: their sum).
    checkpoint_seconds : float, optional
        Seconds between a chain's checkpoints (default ``$STANACCEL_CHECKPOINT_SECONDS``,
        else :data:`CHECKPOINT_SECONDS`); a chain whose checkpoint takes
        long to write (many draws, a large dimension) waits ten times its
        writing time instead, so writing never costs more than a tenth.
    stop : callable (chain, draws kept) -> bool, optional
        Asked after each kept draw; True stops every chain as Ctrl-C does
        (the draws so far are kept, checkpointed, and the run is ``interrupted``).
    chain_seeds : list of SeedSequence, optional
        One per chain, instead of spawning them from ``seed``: chain c of a run
        alone, seeded ``SeedSequence(seed).spawn(chains)[c]``, draws exactly
        what chain c of the whole run does (chains run elsewhere, one per task).

    Raises
    ------
    UndefinedStartError
        A chain's start point has no defined log density (the message names the chain).
    KeyboardInterrupt
        A stop signal came before (:func:`stanaccel.signals.refuse_after_stop`): no chain starts.

    Warns
    -----
    FailingDensityWarning
        Once per chain, when ``FAILURES_BEFORE_WARNING`` steps in a row fail.
    CheckpointWarning
        A checkpoint in ``checkpoint`` is of another run, unreadable or damaged; that chain starts afresh.

    Notes
    -----
    Every kernel of stanaccel keeps all a chain needs in its ``State``, so a
    checkpoint restores it exactly. What a kernel object counts over all its
    chains (``totals`` of the tempering and discretizing kernels) counts this
    call's steps only after a resume; each chain's own statistics (in its
    state, what ``summaries`` report) count every segment. A cache of density
    values starts empty in a resumed run, which changes evaluation counts,
    never draws.
    """
    refuse_after_stop(f"the chains of {name}" if name else "the chains")
    if checkpoint_seconds is None:
        checkpoint_seconds = float(os.environ.get("STANACCEL_CHECKPOINT_SECONDS", CHECKPOINT_SECONDS))
    starts = np.atleast_2d(np.asarray(initial_positions, dtype=float))
    n_chains = starts.shape[0]
    factory = (
        kernel_or_factory if callable(kernel_or_factory) and not hasattr(kernel_or_factory, "step") else None
    )
    kernels = [factory(c) for c in range(n_chains)] if factory else [kernel_or_factory] * n_chains
    sequences = np.random.SeedSequence(seed).spawn(n_chains) if chain_seeds is None else chain_seeds
    if len(sequences) != n_chains:
        raise ValueError(f"{len(sequences)} chain seeds for {n_chains} chains")
    rngs = [np.random.default_rng(s) for s in sequences]
    dim = starts.shape[1]
    label = name or type(kernels[0]).__name__
    positions = np.full((n_chains, n_draws, dim), np.nan)
    stats = {
        k: np.zeros((n_chains, n_draws), dtype=float if k == "p" else bool)
        for k in ("acc", "p", "div", "fail")
    }
    done = np.zeros(n_chains, dtype=int)
    cost = np.zeros(n_chains, dtype=int)
    n_failed = np.zeros(n_chains, dtype=int)
    seconds = np.zeros(n_chains)
    summaries: list = [None] * n_chains
    recorded: list = [[] for _ in range(n_chains)]
    errors: list = [None] * n_chains
    stopping = threading.Event()
    folder = Path(checkpoint) if checkpoint is not None else None
    run_fingerprint = fingerprint(
        chains=n_chains, n_draws=n_draws, thin=thin, dim=dim, seed=seed, kernel=label, starts=starts
    )
    resumes = [_resume(folder, c, run_fingerprint, kernels[c]) for c in range(n_chains)]

    def run_guarded(chains: list[int]) -> None:
        for c in chains:
            if stopping.is_set():
                return
            try:
                run(c)
            except Exception as exc:  # re-raised in the calling thread below
                errors[c] = exc
                stopping.set()

    def run(c: int) -> None:
        kernel, rng, resumed = kernels[c], rngs[c], resumes[c]
        densities = kernel_densities(kernel)
        before = sum(evaluations(d) for d in densities)
        start = time.perf_counter()
        earlier_cost, earlier_seconds = 0, 0.0
        if resumed is None:
            try:
                state = kernel.init(starts[c])
            except UndefinedStartError as error:
                raise UndefinedStartError(f"chain {c}: {error}") from error
            in_a_row, warned = 0, False
        else:
            state, rng.bit_generator.state = resumed.state, resumed.rng_state
            done[c] = resumed.done
            positions[c, : resumed.done] = resumed.positions
            for k in stats:
                stats[k][c, : resumed.done] = resumed.statistics[k]
            recorded[c] = list(resumed.recorded)
            n_failed[c], in_a_row, warned = (
                resumed.failed_proposals,
                resumed.failures_in_a_row,
                resumed.warned,
            )
            earlier_cost, earlier_seconds = resumed.evaluations, resumed.seconds

        def save() -> float:
            """Write the chain's checkpoint; return the seconds it took."""
            began = time.perf_counter()
            kept = int(done[c])
            checkpoints.save(
                folder,
                c,
                ChainCheckpoint(
                    fingerprint=run_fingerprint,
                    done=kept,
                    state=state,
                    rng_state=rng.bit_generator.state,
                    positions=positions[c, :kept].copy(),
                    statistics={k: v[c, :kept].copy() for k, v in stats.items()},
                    recorded=list(recorded[c]),
                    failed_proposals=int(n_failed[c]),
                    failures_in_a_row=in_a_row,
                    warned=warned,
                    evaluations=earlier_cost + sum(evaluations(d) for d in densities) - before,
                    seconds=earlier_seconds + began - start,
                ),
                kernel,
            )
            return time.perf_counter() - began

        saved_at, wait, saved = time.perf_counter(), checkpoint_seconds, int(done[c])
        for d in range(int(done[c]), n_draws):
            for _ in range(thin):
                state, info = kernel.step(state, rng)
                n_failed[c] += info.failed
                in_a_row = in_a_row + 1 if info.failed else 0
                if in_a_row == FAILURES_BEFORE_WARNING and not warned:
                    warn_failing(c, in_a_row, kernel, info)
                    warned = True
            positions[c, d] = state.position
            if record is not None:
                recorded[c].append(record(state))
            stats["acc"][c, d], stats["p"][c, d] = info.accepted, info.acceptance_probability
            stats["div"][c, d], stats["fail"][c, d] = info.divergent, info.failed
            done[c] = d + 1
            if folder is not None and time.perf_counter() - saved_at >= wait:
                wait = max(checkpoint_seconds, 10 * save())
                saved_at, saved = time.perf_counter(), d + 1
            if stop is not None and stop(c, d + 1):
                stopping.set()
            if stopping.is_set():
                break
        if folder is not None and (done[c] > saved or resumed is None):
            save()
        seconds[c] = earlier_seconds + time.perf_counter() - start
        cost[c] = earlier_cost + sum(evaluations(d) for d in densities) - before
        summaries[c] = kernel.summary(state) if hasattr(kernel, "summary") else None

    # Chains run in worker threads (one per chain with a factory, else one for all in
    # turn), so this thread only moves the progress bars and takes Ctrl-C: a chain
    # always ends on a whole draw, which its checkpoint can hold.
    groups = [[c] for c in range(n_chains)] if factory else [list(range(n_chains))]
    threads = [threading.Thread(target=run_guarded, args=(g,), daemon=True) for g in groups]
    bars = ChainBars([n_draws] * n_chains, label, progress, initial=[r.done if r else 0 for r in resumes])
    start = time.perf_counter()
    # Several chains at once: BLAS held to one thread, else each chain's matrix products spawn threads
    # of their own (at 1000 parameters 4 chains of pCN-like products took 4-5x as long).
    with _blas().limit(limits=1, user_api="blas") if len(threads) > 1 else contextlib.nullcontext():
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.25)  # rare wake-ups: each one takes the GIL from the chains
                    bars.update(done)
        except KeyboardInterrupt:
            stopping.set()
            for t in threads:
                if t.ident is not None:  # Ctrl-C may come while the threads start: the rest never ran a chain
                    t.join()
        finally:
            bars.close()
    earlier = [r.seconds if r is not None else 0.0 for r in resumes]
    wall = time.perf_counter() - start + (max(earlier) if factory else sum(earlier))
    failed = [e for e in errors if e is not None]
    if failed:
        raise failed[0]
    interrupted = stopping.is_set()
    ran = done > 0 if interrupted else np.ones(n_chains, dtype=bool)
    kept = int(done[ran].min()) if interrupted and ran.any() else (0 if interrupted else n_draws)
    positions = positions[ran, :kept]
    stats = {k: v[ran] for k, v in stats.items()}
    recorded = [r for r, keep in zip(recorded, ran, strict=True) if keep]
    kernel0 = kernels[0]
    began = time.perf_counter()
    quantities = quantity_fields(constrain(positions) if constrain is not None else None)
    wall += time.perf_counter() - began
    return KernelRun(
        positions=positions,
        accepted=stats["acc"][:, :kept],
        acceptance_probability=stats["p"][:, :kept],
        divergent=stats["div"][:, :kept],
        failed=stats["fail"][:, :kept],
        evaluations=cost[ran],
        failed_proposals=n_failed[ran],
        chain_seconds=seconds[ran],
        wall_seconds=wall,
        exact=bool(getattr(kernel0, "exact", False)),
        sampler=label,
        summaries=[summary for summary, keep in zip(summaries, ran, strict=True) if keep],
        interrupted=interrupted,
        dropped_draws=int(np.sum(done[ran] - kept)),
        **quantities,
        recorded=np.array([r[:kept] for r in recorded]) if record is not None else None,
        resumed_draws=np.array([0 if r is None else r.done for r in resumes])[ran],
    )


@functools.cache
def _blas() -> ThreadpoolController:
    """The thread pools of the libraries loaded (NumPy's OpenBLAS), found once: a search takes 0.4 ms, 7
    ms once TensorFlow is loaded, and a run of short chains (pilots, tempering stages) makes many."""
    return ThreadpoolController()


def _resume(folder: Path | None, chain: int, expected: dict, kernel) -> ChainCheckpoint | None:
    """The chain's checkpoint to continue from, if ``folder`` holds one of this run; else None (warned)."""
    if folder is None:
        return None
    found = checkpoints.load(folder, chain, expected, kernel)
    if isinstance(found, str):
        warnings.warn(
            f"chain {chain}: not resuming: {found}; the chain starts afresh and overwrites it",
            CheckpointWarning,
            stacklevel=3,
        )
        return None
    return found
