"""Signs that a posterior is improper, for the cheap warm-ups: L-BFGS running off, and flat directions.

An improper posterior (a parameter with no proper prior that the data do not
inform, or a likelihood that grows without bound) has no mode for L-BFGS to
find and no Gaussian for a warm-up to fit. It shows in one of two ways:

- L-BFGS runs off toward infinity (:func:`ran_off`): it stops, or fails, far
  out on the unconstrained scale (beyond :data:`RUNAWAY`), where the log
  density kept increasing until a transform overflowed;
- the log density is flat, or rises, along some direction
  (:func:`flat_direction`): the Hessian there is singular, and runs from
  different starts stop at different points along it, which look like
  separate modes.

Each is named with the parameters concerned and what to do: give them a
proper prior.
"""

from __future__ import annotations

import numpy as np

from stanaccel.densities import safe_log_densities, safe_log_density

RUNAWAY = 300.0
"""A bounded parameter's unconstrained coordinate (the log of its distance from the bound) beyond this
magnitude where L-BFGS stopped means that it ran off: a scale e^300 (1e130) times too large or small;
no mode lies there, and the transform overflows not far beyond (e^709)."""

RUNAWAY_UNBOUNDED = 1e100
"""The same for any other coordinate (an unbounded parameter, in its own units, where a mode may lie far
from 0): beyond any quantity a model measures."""

FLAT_SDS = 10.0
"""How far :func:`flat_direction` looks along a direction, in sds of the Gaussian fitted there: a
Gaussian's log density falls by 50 there, a Cauchy's by about 4.6; an improper one's not at all."""

FLAT_LENGTH = 100.0
"""The farthest :func:`flat_direction` looks, in unconstrained units: a flat direction's sd is rounding
noise, or infinite. Far enough that a direction with a proper prior of any sensible scale falls there
(a log scale's by a factor e^100), near enough that no transform overflows. A direction that falls by
less is flat for the warm-up (its prior's sd above some 10^4 units: "or nearly so")."""

FLAT_DROP = 1e-6
"""A direction is flat where the log density falls by less than this (or rises) :data:`FLAT_SDS` sds out
on either side: rounding, not information."""

FLAT_AXES = 50
"""Directions :func:`flat_direction` looks along at most (two log densities each): the weakest ones."""


def ran_off(model, ends: np.ndarray, runs: str) -> str | None:
    """Why the runs' ends say that the log density increases without bound, or None.

    Parameters
    ----------
    model : StanModel
        The posterior (its parameters' names, and which coordinates are a bounded one's log scale).
    ends : ndarray (runs, dim)
        Where each run stopped, unconstrained (inf where a transform overflowed).
    runs : str
        The runs, for the message ("L-BFGS from 4 starts").
    """
    ends = np.atleast_2d(np.asarray(ends, dtype=float))
    limits = np.where(model.log_scale_coordinates(), RUNAWAY, RUNAWAY_UNBOUNDED)
    names = model.param_unc_names()
    beyond = ~(np.abs(ends) <= limits)  # NaN too
    if not beyond.any():
        return None
    run, coordinate = np.argwhere(beyond)[0]
    count = int(beyond.any(axis=1).sum())
    name, value = names[coordinate], ends[run, coordinate]
    return (
        f"{runs} ran off to infinity ({count} of {len(ends)} stopped with {name} at {value:.3g} on the "
        f"unconstrained scale, beyond {limits[coordinate]:g}): the log density increases without bound, so "
        f"the posterior is improper; give {name} a proper prior (or check the likelihood: a scale that may "
        "shrink to 0 at a perfect fit)"
    )


def flat_direction(model, point: np.ndarray, axes: np.ndarray, lengths: np.ndarray, where: str) -> str | None:
    """Why the log density does not fall along one of ``axes`` from ``point``; None where it falls along all.

    Parameters
    ----------
    model : StanModel
        The posterior (its log density with the Jacobian, as the samplers see it).
    point : ndarray (dim,)
        The centre: a mode, or a Gaussian's mean (unconstrained).
    axes : ndarray (k, dim)
        Unit directions to look along, at most :data:`FLAT_AXES` of them (the first ones).
    lengths : ndarray (k,)
        How far to look along each, both ways (:data:`FLAT_SDS` sds).
    where : str
        The centre, for the message ("the mode", "Pathfinder's mean").
    """
    axes, lengths = np.atleast_2d(axes)[:FLAT_AXES], np.asarray(lengths, dtype=float)[:FLAT_AXES]
    centre = safe_log_density(model, point)
    if not np.isfinite(centre) or not len(axes):
        return None
    steps = axes * lengths[:, None]
    probes = safe_log_densities(model, np.concatenate([point + steps, point - steps]))
    change = np.maximum(*np.split(probes, 2)) - centre  # the side that falls least
    flat = np.flatnonzero(change > -FLAT_DROP)
    if not len(flat):
        return None
    i = flat[0]
    names, them = _along(axes[i], model.param_unc_names())
    return (
        f"the log density does not fall along {names} ({lengths[i]:.3g} unconstrained units from {where} it "
        f"changes by {change[i]:+.2g} on one side): the posterior is improper there, flat or increasing "
        f"without bound (no proper prior, and no data to inform it), or nearly so; give {them} a proper prior"
    )


def _along(axis: np.ndarray, names: list[str]) -> tuple[str, str]:
    """The parameters a direction moves (those moved at least half as much as the most moved), for a
    message: as the direction ("a and b together") and as the object of "give ... a proper prior"."""
    size = np.abs(axis)
    moved = [names[j] for j in np.argsort(-size) if size[j] >= 0.5 * size.max()]
    if len(moved) == 1:
        return moved[0], moved[0]
    shown = ", ".join(moved[:3]) if len(moved) > 3 else ", ".join(moved[:-1]) + f" and {moved[-1]}"
    if len(moved) > 3:
        shown += f" and {len(moved) - 3} more"
    return f"{shown} together", "each"
