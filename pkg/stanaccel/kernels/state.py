"""The records every kernel shares: a State, an Info, and the kernel protocol.

A kernel is a Markov transition: ``init(position) -> State``, then
``step(state, rng) -> (State, Info)``. The State caches what was computed at
the current point (log density, gradient), so a rejected proposal costs no
re-evaluation. Randomness comes only from the ``numpy.random.Generator``
passed to ``step``, so a seed reproduces a run.

``init`` refuses a point where the log density (or the gradient a kernel
needs) is undefined, raising :class:`UndefinedStartError`: no kernel can do
anything sensible from there (HMC has no gradient to follow, and a
Metropolis chain would accept its first defined proposal whatever its
density, so its early draws would mean nothing), and an undefined start is
nearly always a mistake to report, not to sample around.

Statistics live in the state, never on a kernel object, so one kernel shared
by several chains reports each chain's own: a kernel keeps its running
counts in ``State.extra[STATISTICS]``, a dict from a key private to that
kernel object to a small dict of counts. A record is replaced, never changed
in place, so no two chains (and no two states) share a count.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class State:
    """A point and what is known of the target there.

    ``gradient`` is None until a kernel that needs it computes it (for
    example after a tempering swap moves the point to another level).
    ``extra`` holds what composite kernels keep (replicas of other levels).
    """

    position: np.ndarray
    log_density: float
    gradient: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Info:
    """What one step did.

    Attributes
    ----------
    accepted : bool
        The proposal was accepted.
    acceptance_probability : float
        The Metropolis-Hastings acceptance probability of the proposal.
    divergent : bool
        An HMC trajectory's energy error exceeded the divergence threshold
        (one stopped where the density is undefined is ``failed``, not divergent).
    failed : bool
        The density was undefined at the proposal, or on the trajectory to it:
        the program rejected it (a Stan ``reject``, a domain error, a value
        that is not finite). Counted as a rejection, not as a divergence.
    details : dict
        Kernel-specific records (swap outcomes, per-level statistics).
    """

    accepted: bool
    acceptance_probability: float
    divergent: bool = False
    failed: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Kernel(Protocol):
    """A Markov transition on the unconstrained space of a log density."""

    exact: bool
    """True if the kernel leaves its target exactly invariant."""

    def init(self, position: np.ndarray) -> State:
        """The state at ``position``; raises :class:`UndefinedStartError` where the density is undefined."""
        ...

    def step(self, state: State, rng: np.random.Generator) -> tuple[State, Info]: ...


class UndefinedStartError(ValueError):
    """A chain's start point has no defined log density (or no defined gradient, for HMC).

    A ``ValueError``: the start point is a bad argument. Raised by every
    kernel's ``init``; :func:`~stanaccel.kernels.run_chains` adds which chain.
    """


START_HINT = (
    "a Stan reject or domain error, NaN or infinity in the data, or a point outside the support "
    "makes it undefined; start the chain where the density is defined"
)


def describe_point(position: np.ndarray) -> str:
    """A short rendering of a point: a few coordinates at each end of a long one."""
    return np.array2string(np.asarray(position), precision=4, threshold=8, edgeitems=3)


def check_start(state: State, kernel: str, *, gradient: bool = False, density: str = "log density") -> State:
    """Return ``state`` if a chain can start there, else raise :class:`UndefinedStartError`.

    Parameters
    ----------
    state : State
        What ``init`` computed at the start point.
    kernel : str
        The kernel (and the part of it) that refuses the point, for the message.
    gradient : bool
        The kernel needs the gradient too (HMC), so ``state.gradient`` must be set.
    density : str
        What ``state.log_density`` is ("log density", "log likelihood", ...), for the message.
    """
    if not np.isfinite(state.log_density):
        problem = f"the {density} is undefined"
    elif gradient and state.gradient is None:
        problem = f"the gradient of the {density} is undefined (its value is {state.log_density:.6g})"
    else:
        return state
    position = np.asarray(state.position)
    if not np.all(np.isfinite(position)):
        problem += "; the start point itself has non-finite coordinates"
    raise UndefinedStartError(
        f"{kernel}: {problem} at the start point {describe_point(position)} "
        f"(dimension {position.size}); {START_HINT}"
    )


STATISTICS = "statistics"
"""The key of ``State.extra`` that holds every kernel's statistics record."""

_serial = itertools.count()


def statistics_key(kernel) -> str:
    """A key that no other kernel object of this process uses: its type and a serial number."""
    return f"{type(kernel).__name__}#{next(_serial)}"


def chain_statistics(state: State, key: str, empty: dict) -> dict:
    """A copy of the record ``key`` in ``state``, or of ``empty`` where the chain has none yet."""
    return dict(state.extra.get(STATISTICS, {}).get(key, empty))


def with_statistics(new: State, old: State, key: str, record: dict) -> State:
    """``new`` with ``old``'s statistics records, the record ``key`` replaced by ``record``.

    The records come from ``old``, the state the step started from, since
    ``new`` may have been made by an inner kernel that keeps none.
    """
    records = {**old.extra.get(STATISTICS, {}), key: record}
    return State(new.position, new.log_density, new.gradient, {**new.extra, STATISTICS: records})


def added(record: dict, counts: dict) -> dict:
    """A new record: ``record`` plus ``counts``, key by key."""
    return {name: record[name] + counts.get(name, 0) for name in record}
