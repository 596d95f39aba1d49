"""Pairing an expensive density pi with a cheap approximation pi*, and timing both."""

from __future__ import annotations

import time

import numpy as np

from stanaccel.densities import COUNTING, charge, safe_log_density, thread_safe


class KeepConstants:
    """A Stan instance's log density with its normalising constants kept, timed.

    Stan can drop constant terms only with autodiff types, so a value with
    them dropped costs nearly as much as a gradient. Keeping them gives a
    plain double-precision evaluation (5x cheaper than the gradient for
    gp_ard at N=1000), and values of different programs on a common scale
    (a low-rank likelihood against the exact one). The constants cancel in
    every acceptance ratio. Use one wrapper for all evaluations of a density,
    so values and gradients agree.

    Attributes
    ----------
    seconds : float
        Time spent in this density's evaluations, summed over the threads
        that evaluate it (a batch evaluated on several cores at once adds
        each evaluation's time, so it can exceed the wall time).
    """

    def __init__(self, model):
        self.model = model
        self.dim = model.dim
        self.seconds = 0.0

    def __repr__(self) -> str:
        return f"KeepConstants({self.model!r})"

    @property
    def thread_safe(self) -> bool:
        """Whether it may be evaluated from several threads at once: whether its model may."""
        return thread_safe(self.model)

    @property
    def n_log_density(self) -> int:
        return self.model.n_log_density

    @property
    def n_gradient(self) -> int:
        return self.model.n_gradient

    def param_unc_names(self) -> list[str]:
        return self.model.param_unc_names()

    def log_density(self, x: np.ndarray) -> float:
        start = time.perf_counter()
        try:
            return self.model.log_density(x, propto=False)
        finally:
            self._add_seconds(time.perf_counter() - start)

    def log_density_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        try:
            return self.model.log_density_gradient(x, propto=False)
        finally:
            self._add_seconds(time.perf_counter() - start)

    def charge(self, log_densities: int, seconds: float = 0.0) -> None:
        """Count evaluations made elsewhere by a copy of this density, and their seconds (:func:`charge`)."""
        charge(self.model, log_densities)
        self._add_seconds(seconds)

    def _add_seconds(self, seconds: float) -> None:
        with COUNTING:  # evaluations in other threads add theirs too
            self.seconds += seconds


def seconds_per_evaluation(density, points: np.ndarray, *, gradient: bool = False, repeats: int = 1) -> float:
    """Mean wall time of one evaluation over ``points`` (n, dim), each evaluated ``repeats`` times."""
    points = np.atleast_2d(points)
    call = density.log_density_gradient if gradient else density.log_density
    call(points[0])  # warm caches and allocators
    start = time.perf_counter()
    for point in points:
        for _ in range(repeats):
            call(point)
    return (time.perf_counter() - start) / (len(points) * repeats)


class ApproximationPair:
    """An expensive density pi and a cheap approximation pi* on one unconstrained space.

    Parameters
    ----------
    exact, approx : log densities
        For Stan instances, wrap each in :class:`KeepConstants`; any two Stan
        instances whose programs declare the same parameters pair (the check
        compares their unconstrained parameter names when both have them).
    """

    def __init__(self, exact, approx):
        if exact.dim != approx.dim:
            raise ValueError(f"pi has dimension {exact.dim} but pi* has {approx.dim}: not one space")
        names = [getattr(d, "param_unc_names", None) for d in (exact, approx)]
        if all(names) and names[0]() != names[1]():
            raise ValueError(f"pi and pi* have different parameters: {names[0]()} and {names[1]()}")
        self.exact, self.approx = exact, approx
        self.dim = exact.dim

    def cost(self, points: np.ndarray, *, repeats: int = 1) -> dict[str, float]:
        """Seconds per evaluation of each (value and gradient) and pi*'s cost relative to pi."""
        out = {}
        for name, density in (("exact", self.exact), ("approx", self.approx)):
            out[f"{name}_seconds"] = seconds_per_evaluation(density, points, repeats=repeats)
            out[f"{name}_gradient_seconds"] = seconds_per_evaluation(
                density, points, gradient=True, repeats=repeats
            )
        out["relative_cost"] = out["approx_seconds"] / out["exact_seconds"]
        out["relative_gradient_cost"] = out["approx_gradient_seconds"] / out["exact_gradient_seconds"]
        return out

    def discrepancy(self, points: np.ndarray) -> dict[str, float]:
        """How far log pi - log pi* varies over ``points`` (for example posterior draws).

        A mark move of a discretizing chain is accepted with probability
        min(1, exp of the change in log pi - log pi*), so the spread of this
        difference over the posterior, not its level, sets the acceptance.
        """
        diff = np.array([safe_log_density(self.exact, p) - safe_log_density(self.approx, p) for p in points])
        diff = diff[np.isfinite(diff)]
        return {"log_ratio_mean": float(diff.mean()), "log_ratio_sd": float(diff.std())}
