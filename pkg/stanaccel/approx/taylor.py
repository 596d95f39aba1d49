"""Approximations built from the posterior alone, about its mode: Laplace and control variates.

Neither needs a second program. Both are expanded about the mode theta^ of
log pi in unconstrained space, Jacobian included (the mode of the density
the samplers move on), with the Hessian there: a
:class:`stanaccel.stan.optimize.Mode`, found by Stan's L-BFGS service
(:func:`stanaccel.stan.optimize.optimize` with ``jacobian=True``):

- :func:`laplace`: the Gaussian log pi*(theta) = log pi(theta^) + 1/2 d^T H d,
  d = theta - theta^, H the Hessian of log pi at the mode. Each evaluation
  costs O(dim^2) and no data; it is as good as the posterior is Gaussian.
- :func:`control_variates`: a random subset S of m of the N observations,
  its log likelihood l_S scaled by N/m, corrected by second-order Taylor
  control variates about the mode (the difference estimator of Quiroz, Kohn,
  Villani and Tran, JASA 2019; the control variates of Cornish et al.,
  Scalable Metropolis-Hastings, ICML 2019):

      log pi*(theta) = log prior(theta) + (N/m) [l_S(theta) - T_S(theta)] + T_full(theta),

  T_X the second-order Taylor expansion of l_X about theta^. Each evaluation
  costs m observations. The full data's expansion (value, gradient and
  Hessian at the mode) is computed once. Since
  log prior + (N/m) l_S is the program on S with ``beta`` scaled by N/m
  (``subset``, with the Jacobian), and prior and Jacobian cancel in
  l_full - (N/m) l_S = log pi - log subset, the correction is one quadratic,
  the Taylor expansion of log pi - log subset about the mode:
  log pi* = log subset + Q. At the mode pi* matches pi to second order; away
  from it log pi - log pi* is the subsampled sum of the observations' Taylor
  remainders, O(|d|^3) each, whose sd over the posterior shrinks like
  N^(-1/2) (Bardenet, Doucet and Holmes 2017, section 7), where a scaled
  subset's grows like N / sqrt(m).

  A program without ``beta`` scales its subset as :class:`ScaledSubset`:
  the same program on S and on S0, the first m0 of S (none where the
  program takes none), log subset = log p_S0 + a (log p_S - log p_S0) with
  a = (N - m0) / (m - m0). Prior and Jacobian cancel in the difference,
  which is the likelihood of the m - m0 others, so log subset is again
  log prior + Jacobian + an unbiased estimate of the log likelihood (S0's
  own, and the others' scaled to the N - m0 left).

  The quadratic Q can make pi* improper far in the tails (where the
  subset's curvature exceeds the data's); the exact samplers that use pi*
  stay exact, since they accept on pi.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

import numpy as np

from stanaccel.stan.optimize import Mode


class Quadratic:
    """q(x) = value + gradient . d + 1/2 d^T hessian d, d = x - centre, with its gradient."""

    def __init__(self, centre: np.ndarray, value: float, gradient: np.ndarray, hessian: np.ndarray):
        self.centre = np.asarray(centre, dtype=float)
        self.value = float(value)
        self.gradient = np.asarray(gradient, dtype=float)
        self.hessian = np.asarray(hessian, dtype=float)

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        d = np.asarray(x, dtype=float) - self.centre
        hd = self.hessian @ d
        return self.value + float(self.gradient @ d) + 0.5 * float(d @ hd), self.gradient + hd


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


class _Timed(ABC):
    """Counts and times evaluations of a log density built on a quadratic (the protocol of KeepConstants).

    A subclass gives its value and gradient (:meth:`_value_gradient`); this class counts and times them.
    """

    names: list[str] | None = None

    def __init__(self, dim: int):
        self.dim = dim
        self.seconds = 0.0
        self.n_log_density = 0
        self.n_gradient = 0

    def param_unc_names(self) -> list[str]:
        return list(self.names) if self.names is not None else [f"theta[{i + 1}]" for i in range(self.dim)]

    @abstractmethod
    def _value_gradient(self, x: np.ndarray, gradient: bool) -> tuple[float, np.ndarray | None]:
        """The log density at ``x`` and, if ``gradient``, its gradient (else None)."""

    def log_density(self, x: np.ndarray) -> float:
        start = time.perf_counter()
        try:
            self.n_log_density += 1
            return self._value_gradient(x, False)[0]
        finally:
            self.seconds += time.perf_counter() - start

    def log_density_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        start = time.perf_counter()
        try:
            self.n_gradient += 1
            return self._value_gradient(x, True)
        finally:
            self.seconds += time.perf_counter() - start


class LaplaceDensity(_Timed):
    """The Laplace approximation as a log density: a Gaussian at the mode, scaled to pi's value there.

    Parameters
    ----------
    quadratic : Quadratic
        log pi's value, zero gradient and Hessian at the mode.
    names : list of str, optional
        The unconstrained parameters' names (for :class:`ApproximationPair`'s check).
    """

    def __init__(self, quadratic: Quadratic, names: list[str] | None = None):
        super().__init__(len(quadratic.centre))
        self.quadratic, self.names = quadratic, names

    def __repr__(self) -> str:
        return f"LaplaceDensity(dim={self.dim})"

    def _value_gradient(self, x, gradient):
        return self.quadratic(x)


class ControlVariateDensity(_Timed):
    """log pi* = log subset + Q: a scaled subset's log density corrected by a quadratic.

    Parameters
    ----------
    subset : log density
        The program on the subset with ``beta`` scaled by N/m (a :class:`KeepConstants`), or a
        :class:`ScaledSubset` where the program has no ``beta``.
    quadratic : Quadratic
        The Taylor expansion of log pi - log subset about the mode.
    """

    def __init__(self, subset, quadratic: Quadratic):
        super().__init__(subset.dim)
        self.subset, self.quadratic = subset, quadratic

    def __repr__(self) -> str:
        return f"ControlVariateDensity({self.subset!r})"

    def param_unc_names(self) -> list[str]:
        return self.subset.param_unc_names()

    @property
    def model(self):
        """The subset's Stan instance (what a study's tuning pilot runs NUTS on); None for a
        :class:`ScaledSubset`, which is two."""
        return getattr(self.subset, "model", None)

    def _value_gradient(self, x, gradient):
        q_value, q_gradient = self.quadratic(x)
        if not gradient:
            return self.subset.log_density(x) + q_value, None
        value, grad = self.subset.log_density_gradient(x)
        return value + q_value, np.asarray(grad) + q_gradient


class ScaledSubset(_Timed):
    """log p_S0 + a (log p_S - log p_S0): a subset's likelihood scaled by a, for a program without beta.

    p_S is the program on a subset S of the observations, p_S0 on a smaller
    S0 inside it (empty where the program takes no observations). Their
    prior and Jacobian cancel in log p_S - log p_S0, the log likelihood of
    the observations in S and not in S0, so with a = (N - m0) / (m - m0)
    this is the program's log density with the likelihood of S - S0 scaled
    to the N - m0 observations outside S0: what ``beta`` = N/m does where
    the program declares it (m0 = 0).

    Parameters
    ----------
    subset, base : log densities
        The program on S and on S0 (each a :class:`KeepConstants`).
    weight : float
        a = (N - m0) / (m - m0).
    """

    def __init__(self, subset, base, weight: float):
        super().__init__(subset.dim)
        self.subset, self.base, self.weight = subset, base, float(weight)

    def __repr__(self) -> str:
        return f"ScaledSubset({self.subset!r}, {self.base!r}, weight={self.weight:g})"

    def param_unc_names(self) -> list[str]:
        return self.subset.param_unc_names()

    def _value_gradient(self, x, gradient):
        a = self.weight
        if not gradient:
            return a * self.subset.log_density(x) + (1 - a) * self.base.log_density(x), None
        value, grad = self.subset.log_density_gradient(x)
        base_value, base_grad = self.base.log_density_gradient(x)
        return a * value + (1 - a) * base_value, a * np.asarray(grad) + (1 - a) * np.asarray(base_grad)


def laplace(mode: Mode) -> LaplaceDensity:
    """The Laplace approximation at ``mode`` (a negative definite Hessian: see :func:`check_laplace`).

    Its parameters are named as the model whose mode it is (``mode.names``).
    """
    quadratic = Quadratic(mode.point, mode.log_density, np.zeros_like(mode.point), mode.symmetric_hessian())
    return LaplaceDensity(quadratic, mode.names)


def check_laplace(mode: Mode) -> str | None:
    """What is wrong with a Gaussian at ``mode`` (a Hessian that is not negative definite), or None.

    A flat direction (an improper prior, a parameter the data do not
    identify) leaves the Hessian singular; a saddle leaves it indefinite.
    """
    eigenvalues = np.linalg.eigvalsh(-mode.symmetric_hessian())
    largest = float(np.max(np.abs(eigenvalues)))
    if eigenvalues[0] > 1e-10 * max(largest, 1.0):
        return None
    kind = "singular" if eigenvalues[0] > -1e-10 * max(largest, 1.0) else "not negative definite"
    return (
        f"the Hessian of log pi at the mode is {kind} (smallest eigenvalue of -H: {eigenvalues[0]:.3g}, "
        f"largest {eigenvalues[-1]:.3g}), so there is no Gaussian approximation there; give every "
        "parameter a proper prior, or use an approximation that keeps the likelihood's shape"
    )


def control_variate_quadratic(subset, mode: Mode) -> Quadratic:
    """The Taylor expansion of log pi - log subset about ``mode`` (of pi): value, gradient, Hessian.

    pi's value (with its constants, as the subset's), gradient and Hessian
    there come with the mode, so nothing of pi is evaluated again; the
    subset's Hessian is by central differences of its gradients (2 dim
    subset gradients).
    """
    sub_value, sub_grad = subset.log_density_gradient(mode.point)

    def subset_gradient(x):
        return np.asarray(subset.log_density_gradient(x)[1], dtype=float)

    hessian = mode.symmetric_hessian() - central_hessian(subset_gradient, mode.point)
    return Quadratic(mode.point, mode.log_density - sub_value, mode.gradient - np.asarray(sub_grad), hessian)


def control_variates(subset, quadratic: Quadratic) -> ControlVariateDensity:
    """pi* of :func:`control_variate_quadratic` on a chain's own subset instance."""
    return ControlVariateDensity(subset, quadratic)
