"""The posterior mode in unconstrained space and the Hessian there: :func:`find_mode`.

The automatic approximations (:mod:`stanaccel.approx.taylor`) are built
about the mode. :func:`find_mode` is the one place that finds it, so that it
can become Stan's own L-BFGS service (``stan/services/optimize``) by changing
this one function: it maximises ``density.log_density_gradient`` by scipy's
L-BFGS-B, polishes the result with a few Newton steps, and differentiates
the gradient by central differences (:func:`central_hessian`), since the
Stan bridge gives gradients but no Hessians.

The mode is of the log density Stan evaluates on the unconstrained space,
Jacobian included (the mode of the density the samplers move on), not the
constrained MAP that Stan's ``optimize`` reports by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from stanaccel.densities import safe_log_density_gradient

NEWTON_STEPS = 5
"""At most this many Newton steps (with the Hessian at the L-BFGS end point) polish the mode."""


@dataclass
class Mode:
    """The mode of a log density and its Hessian there.

    Attributes
    ----------
    x : ndarray (dim,)
        The mode, in the density's unconstrained coordinates.
    log_density : float
        The log density at ``x``.
    gradient : ndarray (dim,)
        The gradient at ``x`` (near zero at convergence).
    hessian : ndarray (dim, dim)
        The Hessian of the log density at ``x`` by central differences of
        gradients (symmetric; negative definite at a proper mode).
    iterations : int
        L-BFGS iterations.
    evaluations : int
        Gradient evaluations, the Hessian's included.
    newton_decrement : float
        sqrt(g^T (-H)^-1 g) at ``x``: the distance to the quadratic's peak in
        units of the Laplace approximation's sd (NaN when -H is not positive definite).
    converged : bool
    message : str
    names : list of str or None
        The density's unconstrained parameter names, when it has them.
    """

    x: np.ndarray
    log_density: float
    gradient: np.ndarray
    hessian: np.ndarray
    iterations: int
    evaluations: int
    newton_decrement: float
    converged: bool
    message: str
    names: list[str] | None = None


def central_hessian(gradient, x: np.ndarray, steps: np.ndarray | None = None) -> np.ndarray:
    """The Hessian at ``x`` by central differences of ``gradient(x) -> ndarray``: 2 dim calls.

    Column i is (g(x + h_i e_i) - g(x - h_i e_i)) / (2 h_i), with h_i =
    eps^(1/3) max(1, |x_i|) by default (the step that balances the O(h^2)
    truncation error against rounding); the result is symmetrised.
    """
    x = np.asarray(x, dtype=float)
    if steps is None:
        steps = np.finfo(float).eps ** (1 / 3) * np.maximum(1.0, np.abs(x))
    columns = []
    for i, h in enumerate(steps):
        step = np.zeros_like(x)
        step[i] = h
        columns.append((gradient(x + step) - gradient(x - step)) / (2 * h))
    hessian = np.column_stack(columns)
    return (hessian + hessian.T) / 2


def newton_decrement(gradient: np.ndarray, hessian: np.ndarray) -> float:
    """sqrt(g^T (-H)^-1 g), or NaN when -H is not positive definite."""
    try:
        root = np.linalg.cholesky(-hessian)
    except np.linalg.LinAlgError:
        return float("nan")
    w = np.linalg.solve(root, gradient)
    return float(np.sqrt(w @ w))


def find_mode(
    density, start: np.ndarray | None = None, *, gtol: float = 1e-8, max_iterations: int = 1000
) -> Mode:
    """The mode of ``density`` (any log density with ``log_density_gradient``) and its Hessian.

    scipy's L-BFGS-B maximises the log density from ``start`` (default: the
    origin, the centre of Stan's default initialisation); a point where the
    density is undefined counts as minus infinity, so the line search backs
    off from it. Up to :data:`NEWTON_STEPS` Newton steps with the Hessian at
    the L-BFGS end point then take the mode to rounding accuracy (each is
    kept only if it raises the log density). Stan's ``optimize`` service
    could replace the whole search: only this function would change.

    Parameters
    ----------
    density : log density
        Its ``log_density_gradient(x) -> (value, gradient)`` on the unconstrained space.
    start : ndarray, optional
    gtol : float
        L-BFGS-B stops when every gradient component is below this.
    max_iterations : int

    Returns
    -------
    Mode
        ``converged`` is False when the Newton decrement stays above 1e-3
        (or, where -H is not positive definite, when L-BFGS did not
        converge); the Hessian is returned as found (the caller decides
        what a singular or indefinite one means).
    """
    x = np.zeros(density.dim) if start is None else np.array(start, dtype=float)
    count = 0

    def evaluate(point):
        nonlocal count
        count += 1
        return safe_log_density_gradient(density, point)

    def negative(point):
        value, grad = evaluate(point)
        if grad is None:
            return np.inf, np.zeros_like(point)
        return -value, -grad

    def gradient(point):
        value, grad = evaluate(point)
        if grad is None:
            raise ArithmeticError(f"the log density is undefined near the mode, at {point}")
        return grad

    found = minimize(
        negative,
        x,
        jac=True,
        method="L-BFGS-B",
        options={"gtol": gtol, "ftol": 1e-15, "maxiter": max_iterations},
    )
    x = found.x
    value, grad = evaluate(x)
    if grad is None:
        raise ArithmeticError(f"L-BFGS ended where the log density is undefined: {found.message}")
    hessian = central_hessian(gradient, x)
    for _ in range(NEWTON_STEPS):
        if not newton_decrement(grad, hessian) > 1e-8:  # converged, or -H not positive definite (NaN)
            break
        proposal = x - np.linalg.solve(hessian, grad)
        new_value, new_grad = evaluate(proposal)
        if new_grad is None or new_value < value:
            break
        x, value, grad = proposal, new_value, new_grad
    decrement = newton_decrement(grad, hessian)
    # The Newton decrement is the test: L-BFGS-B's line search often ends "abnormally" at rounding level.
    converged = bool(decrement < 1e-3) if np.isfinite(decrement) else bool(found.success)
    names = density.param_unc_names() if hasattr(density, "param_unc_names") else None
    return Mode(
        x, value, grad, hessian, int(found.nit), count, decrement, converged, str(found.message), names
    )
