"""Mean-field variational inference for the sigmoidal GP density model (Donner & Opper, Algorithm 2).

The posterior over the augmented variables is approximated by
q = q1(omega_N, Pi) q2(lambda, g), with

- q(omega_n) = PG(1, c_n), c_n = sqrt(E[g(x_n)^2]);
- q(Pi): a marked Poisson process with intensity
  Lambda_1(x, omega) = lambda_1 pi(x) exp(-g_1(x)/2) / (2 cosh(c(x)/2)) PG(omega | 1, c(x)),
  lambda_1 = exp(E[ln lambda]), g_1 = E[g], c = sqrt(E[g^2]);
- q(lambda) = Gamma(alpha, 1), alpha = N + int Lambda_1;
- q(g) = p(g | g_s) q(g_s): a sparse GP with L inducing points, q(g_s) Gaussian
  in closed form (the paper's effective likelihood).

Integrals over X are a quadrature: the trapezoid rule on a regular grid of
``quadrature`` points per axis over +-5 sd of pi's whitened coordinates,
x_j = mean + chol z_j, weights w_j proportional to N(z_j | 0, I) (the grid
moves with pi's hyperparameters, so the bound is differentiable in them).
Why not importance sampling from pi on a fixed sample (what this module did
before): the hyperparameter steps then maximise the bound *on that sample*,
and on the 2-D mixture at N >= 1000 they overfitted it: mu0 fell to -7, the
amplitude rose to 5, g grew large between the 3000 sample points, the
sampled integral came out 26 times too small, the bound rose far above the
truth's own log likelihood (-2060 at N = 1000 against about -2900) and the
density integrated to 3.4. A grid cannot be fitted
between its points once it resolves g, and the fit checks that it does (the
mass check below). The grid's cost is per_axis^dim points: 200 in 1-D,
48^2 in 2-D, 20^3 in 3-D by default; beyond three dimensions give
``quadrature`` yourself. The inducing values are kept whitened, g_s = mu0 +
L_s u, so q(u) = N(m, S) against a N(0, I) prior.

The bound. Putting the optimal q1 (given q2) into the ELBO gives

    F = N psi(alpha) + sum_n ln pi(x_n) + sum_n [g_1(x_n)/2 - ln 2 - ln cosh(c_n/2)]
        + exp(psi(alpha)) sum_j w_j rho(x_j) + ln Gamma(alpha) - alpha psi(alpha) - KL(q(u) || N(0, I)),

rho(x) = exp(-g_1(x)/2) / (2 cosh(c(x)/2)), up to a constant from the improper
prior 1/lambda. F is the ELBO maximised over q1, so it is itself a lower bound.
Each iteration (i) sets q(u) to the paper's closed form given the q1 that is
optimal at the current q(u), (ii) sets alpha to the root of alpha = N +
exp(psi(alpha)) sum_j w_j rho(x_j) (q(lambda)'s optimum given the optimal q1) and
(iii) takes Adam steps on the hyperparameters (kernel, base measure, mu0) by
the gradient of F plus their log hyperprior (exact, by TensorFlow). Steps (i)
and (ii) are the coordinate optima (checked against numerical optima of F) and
never decrease F. Adam's steps, with momentum, can (they did by up to 75 on
the 2-D mixture, which is what first sent the hyperparameters where the
sample could be overfitted): a step that lowers F plus the log hyperprior is
undone and Adam's rate halved, so that objective never decreases. The same
hyperpriors as the Gibbs sampler are added to the objective (log amplitude ~
N(0, 1.5^2), log lengthscale_d ~ N(log sd_d, 1.5^2), mu0 ~ N(0, 2^2)):
without mu0's, the bound keeps rising slowly as mu0 falls, for the reason
the Gibbs module gives.

The fit is guarded (:class:`VariationalWarning`): it stops if its objective
falls under the closed-form updates or is not finite (a numerical failure),
or if the density's mass is not 1 to within ``mass_tolerance``: every
``check_every`` iterations Z = int pi E_q[sigma(g)] is computed on the grid
and on the grid shifted by half a spacing, whose ratio is the density's mass
by an independent rule; a ratio off 1 means the grid no longer resolves g.
It then returns the last state that passed the check.

This is an approximate method: q is not the posterior (mean field, sparse GP).
The inducing points stay where they were put: half at k-means centres of the
data, half drawn from the initial base measure.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import digamma, expit, gammaln, polygamma
from threadpoolctl import threadpool_limits

from stanaccel.extras import import_keras
from stanaccel.gpdensity.base_measure import GaussianBase, normal_grid
from stanaccel.gpdensity.covariance import JITTER, SquaredExponential
from stanaccel.gpdensity.gibbs import HYPER_PRIOR_SD, check_data
from stanaccel.gpdensity.inducing import inducing_points
from stanaccel.results import Result

NOTE = "approximate: mean-field variational posterior with a sparse GP; not the exact posterior"
DEFAULT_QUADRATURE = {1: 200, 2: 48, 3: 20}
"""Grid points per axis for the integrals over X, by dimension."""


class VariationalWarning(UserWarning):
    """The variational fit stopped early: its bound fell or was not finite, or its density's mass left 1."""


def _tensorflow():
    return import_keras("the GP density model's variational method")


def solve_alpha(n_data: int, mean_rho: float) -> float:
    """The root of alpha = N + exp(psi(alpha)) mean_rho (q(lambda)'s optimum), by Newton's method.

    ``mean_rho`` < 1 always (rho <= sigma(-g_1) averaged), so the root is unique.
    """
    alpha = n_data / max(1.0 - mean_rho, 1e-12)
    for _ in range(50):
        value = alpha - n_data - np.exp(digamma(alpha)) * mean_rho
        slope = 1 - np.exp(digamma(alpha)) * polygamma(1, alpha) * mean_rho
        step = value / slope
        alpha = max(alpha - step, 0.5 * alpha)
        if abs(step) < 1e-10 * alpha:
            break
    return float(alpha)


@dataclass
class VariationalFit(Result):
    """The fitted q and the hyperparameters, with the bound's history.

    A :class:`~stanaccel.results.Result` (``draws()``, ``summary()``,
    ``metrics()``, ``to_inference_data()``, ``save(path)``) whose posterior
    holds independent draws from q, not MCMC draws (one chain, attributes
    ``exact`` False and ``method`` "variational"): 500 draws of the density at
    the inducing points and of lambda (see :meth:`inference_groups`). For the
    density on a grid of your own, convert
    ``fit.inference_groups(at=grid)`` with ``stanaccel.diagnostics.to_inference_data``.
    """

    kernel: SquaredExponential
    base: GaussianBase
    mu0: float
    inducing: np.ndarray
    mean: np.ndarray  # m of q(u)
    cov: np.ndarray  # S of q(u)
    alpha: float
    elbo: list[float] = field(default_factory=list)
    objective: list[float] = field(default_factory=list)  # elbo plus the log hyperprior: never decreases
    seconds: float = 0.0
    iterations: int = 0
    mass: float = float("nan")  # the last mass check (see the module docstring)
    stopped: str = ""  # why the fit stopped early, with a VariationalWarning; "" if it did not

    def g_moments(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of g(x) under q(g) = p(g | g_s) q(g_s) at the points."""
        L = np.linalg.cholesky(self.kernel(self.inducing))
        phi = np.linalg.solve(L, self.kernel(self.inducing, points))
        mean = self.mu0 + phi.T @ self.mean
        prior_var = np.maximum(self.kernel.amplitude**2 - np.sum(phi**2, 0), 0.0)
        return mean, prior_var + np.sum(phi * (self.cov @ phi), 0)

    def density_draws(self, at: np.ndarray, n_draws: int, rng: np.random.Generator,
                      n_normaliser: int = 4096) -> np.ndarray:  # fmt: skip
        """Draws of sigma(g(x)) pi(x) / Z at ``at`` with g from q.

        g(x) = mu0 + phi(x)^T u + sqrt(v(x)) e_x, u ~ q(u), v the conditional prior
        variance given the inducing values, e_x independent per point: exact
        marginals at each point (the joint of the small conditional part is
        ignored). Z = E_pi[sigma(g)] from ``n_normaliser`` quasi-random points of pi.
        """
        at = np.asarray(at, dtype=float).reshape(-1, self.base.dim)
        reference = self.base.quasi_sample(n_normaliser, seed=int(rng.integers(2**31)))
        points = np.vstack([at, reference])
        L = np.linalg.cholesky(self.kernel(self.inducing))
        phi = np.linalg.solve(L, self.kernel(self.inducing, points))
        prior_sd = np.sqrt(np.maximum(self.kernel.amplitude**2 - np.sum(phi**2, 0), 0.0))
        u = self.mean + rng.standard_normal((n_draws, len(self.mean))) @ np.linalg.cholesky(self.cov).T
        g = self.mu0 + u @ phi + prior_sd * rng.standard_normal((n_draws, len(points)))
        normaliser = expit(g[:, len(at) :]).mean(axis=1, keepdims=True)
        return expit(g[:, : len(at)]) * np.exp(self.base.logpdf(at)) / normaliser

    def inference_groups(self, at: np.ndarray | None = None, n_draws: int = 500, seed: int = 0) -> dict:
        """Groups for ``stanaccel.diagnostics.to_inference_data``: independent draws from q (one chain).

        The posterior holds ``density`` (1, n_draws, len(at)), from :meth:`density_draws`,
        and ``lambda`` (1, n_draws). ``at`` defaults to the inducing points.
        """
        rng = np.random.default_rng(seed)
        where = "the inducing points" if at is None else "the points given"
        at = self.inducing if at is None else at
        posterior = {
            "density": self.density_draws(at, n_draws, rng)[None],
            "lambda": rng.gamma(self.alpha, 1.0, size=(1, n_draws)),
        }
        attrs = {
            "sampler": "gp_density_variational",
            "method": "variational",
            "exact": False,
            "density_at": where,
            "note": NOTE,
            "mu0": self.mu0,
            "amplitude": self.kernel.amplitude,
            "lengthscales": self.kernel.lengthscales,
            "base_mean": self.base.mean,
            "base_chol": self.base.chol,
            "elbo": self.elbo[-1] if self.elbo else float("nan"),
            "iterations": self.iterations,
            "mass": self.mass,
            "stopped": self.stopped,
        }
        return {"posterior": posterior, "attrs": attrs}

    def _metrics_arguments(self) -> dict[str, Any]:
        return {"wall_seconds": self.seconds}


class VariationalDensity:
    """Algorithm 2 for data (N, dim) with a Gaussian base measure.

    Parameters
    ----------
    data : ndarray (N, dim) or (N,)
    n_inducing : int
        L, the number of inducing points (half k-means centres, half base draws).
    quadrature : int or None
        Grid points per axis for the integrals over X (the grid has
        ``quadrature ** dim`` points; see the module docstring). None: 200,
        48 and 20 in one, two and three dimensions; required beyond three.
    learning_rate : float
        Adam's step for the hyperparameters (log amplitude, log lengthscales,
        base mean and log-Cholesky factor, mu0).
    adam_steps : int
        Adam steps per iteration.
    update_hyperparameters : bool
        False keeps the starting kernel, base measure and mu0 (the closed-form
        updates alone, which never decrease the bound).
    kernel, base, mu0 : optional starting values
        Default: amplitude 1 and the data's sd per dimension; the data's
        Gaussian; 0.
    check_every : int
        Iterations between the checks of the density's mass (and one at the end).
    mass_tolerance : float
        The largest |mass - 1| the check lets pass.
    seed : int
        Seeds the inducing points' draws and k-means.
    blas_threads : int or None
        BLAS threads while fitting (threadpoolctl; None leaves them as they
        are): one by default, as :class:`~stanaccel.gpdensity.GibbsSampler`.
        TensorFlow's own threads are not affected.
    """

    exact = False
    note = NOTE

    def __init__(self, data, *, n_inducing: int = 50, quadrature: int | None = None,
                 learning_rate: float = 0.02, adam_steps: int = 1, update_hyperparameters: bool = True,
                 kernel: SquaredExponential | None = None, base: GaussianBase | None = None,
                 mu0: float = 0.0, mu0_prior: tuple[float, float] = (0.0, 2.0), check_every: int = 25,
                 mass_tolerance: float = 0.02, seed: int = 0, blas_threads: int | None = 1):  # fmt: skip
        self.data = check_data(data)
        dim = self.data.shape[1]
        if quadrature is None:
            if dim not in DEFAULT_QUADRATURE:
                raise ValueError(
                    f"the data have {dim} dimensions: give quadrature, the grid points per axis for the "
                    f"integrals over X (the grid has quadrature ** {dim} points)"
                )
            quadrature = DEFAULT_QUADRATURE[dim]
        if check_every < 1 or not 0 < mass_tolerance < 1:
            raise ValueError(
                f"check_every must be at least 1 and mass_tolerance in (0, 1), "
                f"not {check_every} and {mass_tolerance}"
            )
        self.scale = self.data.std(axis=0)
        base = base or GaussianBase.fit(self.data)
        kernel = kernel or SquaredExponential(1.0, self.scale)
        if base.dim != self.data.shape[1]:
            raise ValueError(f"the base measure has {base.dim} dimensions, the data {self.data.shape[1]}")
        self.inducing = inducing_points(self.data, n_inducing, base, seed)
        self.quadrature = int(quadrature)
        self.nodes, self.weights = normal_grid(dim, self.quadrature)
        self.shifted = normal_grid(dim, int(quadrature), offset=0.5)
        self.check_every, self.mass_tolerance = int(check_every), float(mass_tolerance)
        self.learning_rate = float(learning_rate)
        self.adam_steps = int(adam_steps)
        self.update_hyperparameters = bool(update_hyperparameters)
        self.mu0_prior = (float(mu0_prior[0]), float(mu0_prior[1]))
        self.start = (kernel, base, float(mu0))
        if blas_threads is not None and blas_threads < 1:
            raise ValueError(f"blas_threads must be at least 1 (or None), not {blas_threads}")
        self.blas_threads = blas_threads

    # The bound as a TensorFlow function of the hyperparameters, for its gradient.

    def _variables(self, kernel, base, mu0):
        tf, _ = _tensorflow()
        values = np.concatenate([kernel.log_parameters(), base.parameters(), [mu0]])
        return tf.Variable(values, dtype=tf.float64)

    def _unpack(self, theta: np.ndarray):
        dim = self.data.shape[1]
        kernel = SquaredExponential.from_log_parameters(theta[: 1 + dim])
        base = GaussianBase.from_parameters(theta[1 + dim : -1], dim)
        return kernel, base, float(theta[-1])

    def _features(self, theta):
        """phi = L_s^-1 k_s(x) and the conditional prior variance at the data and the grid points, ln pi
        at the data and L_s (TensorFlow, differentiable in theta)."""
        tf, _ = _tensorflow()
        dim = self.data.shape[1]
        log_amp, lengthscales = theta[0], tf.exp(theta[1 : 1 + dim])
        mean = theta[1 + dim : 1 + 2 * dim]
        chol = self._chol(theta[1 + 2 * dim : -1], dim)
        grid = mean + tf.linalg.matmul(tf.constant(self.nodes), chol, transpose_b=True)
        points = tf.concat([tf.constant(self.data), grid], axis=0)
        amp2 = tf.exp(2 * log_amp)

        def k(a, b):
            a, b = a / lengthscales, b / lengthscales
            sq = (
                tf.reduce_sum(tf.square(a), 1)[:, None]
                + tf.reduce_sum(tf.square(b), 1)[None, :]
                - 2 * tf.matmul(a, b, transpose_b=True)
            )
            return amp2 * tf.exp(-0.5 * tf.maximum(sq, 0.0))

        Z = tf.constant(self.inducing)
        Ks = k(Z, Z) + JITTER * amp2 * tf.eye(len(self.inducing), dtype=tf.float64)
        Ls = tf.linalg.cholesky(Ks)
        phi = tf.linalg.triangular_solve(Ls, k(Z, points), lower=True)
        prior_var = tf.maximum(amp2 - tf.reduce_sum(tf.square(phi), 0), 0.0)
        centred = tf.linalg.triangular_solve(chol, tf.transpose(tf.constant(self.data) - mean), lower=True)
        log_pi = (
            -0.5 * tf.reduce_sum(tf.square(centred), 0)
            - tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)))
            - 0.5 * dim * np.log(2 * np.pi)
        )
        return phi, prior_var, log_pi, Ls

    @staticmethod
    def _chol(values, dim):
        tf, _ = _tensorflow()
        rows, cols = np.tril_indices(dim)
        values = tf.where(tf.constant(rows == cols), tf.exp(values), values)
        return tf.scatter_nd(np.stack([rows, cols], 1), values, (dim, dim))

    def _bound(self, theta, m, S, alpha):
        """F (see the module docstring, less ln Gamma(N) so that it bounds ln p(data | theta)) and F
        plus the log hyperprior, as TensorFlow scalars; m, S, alpha are tensors."""
        tf, _ = _tensorflow()
        n, dim = self.data.shape
        phi, prior_var, log_pi, _ = self._features(theta)
        mu0 = theta[-1]
        g1 = mu0 + tf.linalg.matvec(phi, m, transpose_a=True)
        var = prior_var + tf.reduce_sum(phi * tf.matmul(S, phi), 0)
        c = tf.sqrt(tf.square(g1) + var)
        log_cosh = c / 2 + tf.math.softplus(-c) - np.log(2.0)  # ln cosh(c/2)
        data_term = tf.reduce_sum(g1[:n] / 2 - np.log(2.0) - log_cosh[:n])
        rho = tf.exp(-g1[n:] / 2 - log_cosh[n:] - np.log(2.0))
        psi = tf.math.digamma(alpha)
        kl = 0.5 * (
            tf.linalg.trace(S) + tf.reduce_sum(tf.square(m)) - len(self.inducing) - tf.linalg.logdet(S)
        )
        elbo = (
            n * psi + tf.reduce_sum(log_pi) + data_term + tf.exp(psi) * tf.reduce_sum(self.weights * rho)
            + tf.math.lgamma(alpha) - alpha * psi - kl - gammaln(n)
        )  # fmt: skip
        centre = np.log(np.concatenate([[1.0], self.scale]))
        log_prior = -0.5 * tf.reduce_sum(
            tf.square((theta[: 1 + dim] - centre) / HYPER_PRIOR_SD)
        ) - 0.5 * tf.square((mu0 - self.mu0_prior[0]) / self.mu0_prior[1])
        return elbo, elbo + log_prior

    def _compiled(self):
        """The bound, its gradient and the features as compiled TensorFlow functions (built once)."""
        if not hasattr(self, "_functions"):
            tf, _ = _tensorflow()

            def gradient(theta, m, S, alpha):
                with tf.GradientTape() as tape:
                    tape.watch(theta)
                    _, value = self._bound(theta, m, S, alpha)
                return -tape.gradient(value, theta)

            self._functions = {
                "bound": tf.function(self._bound, autograph=False),
                "gradient": tf.function(gradient, autograph=False),
                "features": tf.function(self._features, autograph=False),
            }
        return self._functions

    def bound(self, theta, m, S, alpha) -> tuple[float, float]:
        """(F, F + log hyperprior) at hyperparameters ``theta`` and q = (m, S, alpha)."""
        elbo, total = self._compiled()["bound"](theta, _tensor(m), _tensor(S), _tensor(alpha))
        return float(elbo), float(total)

    # The closed-form factors.

    @staticmethod
    def _moments(phi, prior_var, mu0, m, S):
        """g_1 = E[g] and c = sqrt(E[g^2]) at the data and grid points under q(u) = N(m, S)."""
        g1 = mu0 + phi.T @ m
        return g1, np.sqrt(g1**2 + prior_var + np.sum(phi * (S @ phi), 0))

    def update_q(self, theta, m, S, alpha):
        """One round of the closed-form updates: q(u) given the optimal q1, then q(lambda).

        Returns the new (m, S, alpha).
        """
        n = len(self.data)
        mu0 = float(theta.numpy()[-1])
        phi, prior_var, _, _ = self._compiled()["features"](theta)
        phi, prior_var = phi.numpy(), prior_var.numpy()
        g1, c = self._moments(phi, prior_var, mu0, m, S)
        omega = _polyagamma_mean(c)
        log_cosh = c / 2 + np.logaddexp(0, -c) - np.log(2.0)
        intensity = np.exp(digamma(alpha)) * np.exp(-g1[n:] / 2 - log_cosh[n:] - np.log(2.0))
        intensity = intensity * self.weights
        weights = np.concatenate([omega[:n], intensity * omega[n:]])
        linear = np.concatenate([0.5 - omega[:n] * mu0, intensity * (-0.5 - omega[n:] * mu0)])
        precision = np.eye(len(m)) + (phi * weights) @ phi.T
        chol = np.linalg.cholesky(precision)
        S = np.linalg.solve(chol.T, np.linalg.solve(chol, np.eye(len(m))))
        m = S @ (phi @ linear)
        g1, c = self._moments(phi, prior_var, mu0, m, S)
        log_cosh = c / 2 + np.logaddexp(0, -c) - np.log(2.0)
        alpha = solve_alpha(n, float(np.sum(self.weights * np.exp(-g1[n:] / 2 - log_cosh[n:] - np.log(2.0)))))
        return m, S, alpha

    def mass(self, theta, m, S) -> float:
        """The density's mass by the shifted grid: Z there over Z on the fit's grid, Z = int pi E_q[sigma(g)]
        (E_q[sigma(g)] by the probit approximation sigma(g_1 / sqrt(1 + pi var / 8)))."""
        kernel, base, mu0 = self._unpack(np.asarray(theta))
        fit = VariationalFit(kernel, base, mu0, self.inducing, m, S, float("nan"))
        normalisers = []
        for nodes, weights in ((self.nodes, self.weights), self.shifted):
            mean, var = fit.g_moments(base.mean + nodes @ base.chol.T)
            normalisers.append(np.sum(weights * expit(mean / np.sqrt(1 + np.pi * var / 8))))
        return float(normalisers[1] / normalisers[0])

    def fit(self, iterations: int = 300, *, tol: float = 1e-6, patience: int = 10,
            progress: bool = False) -> VariationalFit:  # fmt: skip
        """Iterate the closed-form updates and Adam steps until the objective's relative change stays
        below ``tol`` for ``patience`` iterations (or ``iterations`` are done). Stops early, with a
        :class:`VariationalWarning`, if a check fails (see the module docstring)."""
        if self.blas_threads is None:
            return self._fit(iterations, tol, patience, progress)
        with threadpool_limits(self.blas_threads, "blas"):
            return self._fit(iterations, tol, patience, progress)

    def _fit(self, iterations: int, tol: float, patience: int, progress: bool) -> VariationalFit:
        _, keras = _tensorflow()
        started = time.perf_counter()
        theta = self._variables(*self.start)
        n_inducing = len(self.inducing)
        m, S, alpha = np.zeros(n_inducing), np.eye(n_inducing), float(len(self.data))
        rate = self.learning_rate
        optimizer = keras.optimizers.Adam(rate)
        elbo, objective, quiet, stopped = [], [], 0, ""
        kept = (theta.numpy(), m, S, alpha, 0, float("nan"))  # the last state that passed the mass check
        bar = _progress(iterations, progress)
        for i in range(iterations):
            m, S, alpha = self.update_q(theta, m, S, alpha)
            bound, total = self.bound(theta, m, S, alpha)
            if not np.isfinite(total) or (objective and total < objective[-1] - 1e-9 * abs(objective[-1])):
                previous = objective[-1] if objective else float("nan")
                stopped = (f"the bound fell or is not finite under the closed-form updates at iteration "
                           f"{i + 1} ({previous:.6g} to {total:.6g}): a numerical failure")  # fmt: skip
                break
            if self.update_hyperparameters:
                before = theta.numpy()
                for _ in range(self.adam_steps):
                    gradient = self._compiled()["gradient"](
                        theta.read_value(), _tensor(m), _tensor(S), _tensor(alpha)
                    )
                    optimizer.apply_gradients([(gradient, theta)])
                stepped = self.bound(theta, m, S, alpha)
                if stepped[1] >= total:
                    bound, total = stepped
                else:  # Adam overshot: undo the step, halve the rate
                    theta.assign(before)
                    rate /= 2
                    optimizer.learning_rate = rate
            elbo.append(bound)
            objective.append(total)
            bar.update(1)
            bar.set_postfix(elbo=f"{elbo[-1]:.2f}")
            last = i == iterations - 1
            if i and abs(objective[-1] - objective[-2]) < tol * abs(objective[-1]):
                quiet += 1
                last = last or quiet >= patience
            else:
                quiet = 0
            if last or i == 0 or (i + 1) % self.check_every == 0:
                mass = self.mass(theta.numpy(), m, S)
                if abs(mass - 1) > self.mass_tolerance:
                    stopped = (f"the density's mass by a shifted grid is {mass:.4f} at iteration {i + 1}: "
                               f"the quadrature grid ({self.quadrature} points per axis) does not resolve g; "
                               f"raise quadrature")  # fmt: skip
                    if i == 0:  # no state passed: return this one, flagged
                        kept = (theta.numpy(), m, S, alpha, len(elbo), mass)
                    break
                kept = (theta.numpy(), m, S, alpha, len(elbo), mass)
            if last:
                break
        bar.close()
        values, m, S, alpha, count, mass = kept
        if stopped:
            passed = count and abs(mass - 1) <= self.mass_tolerance
            which = ", the last whose mass check passed" if passed else " (no state passed the mass check)"
            warnings.warn(
                f"variational fit stopped: {stopped}. Returning the state at iteration {count}{which}.",
                VariationalWarning,
                stacklevel=3,
            )
        kernel, base, mu0 = self._unpack(values)
        return VariationalFit(kernel, base, mu0, self.inducing, m, S, alpha, elbo[:count], objective[:count],
                              time.perf_counter() - started, count, mass, stopped)  # fmt: skip


def _tensor(value):
    tf, _ = _tensorflow()
    return tf.constant(value, dtype=tf.float64)


def _polyagamma_mean(c: np.ndarray) -> np.ndarray:
    """E[omega] for omega ~ PG(1, c): tanh(c/2) / (2c), 1/4 at c = 0."""
    c = np.abs(c)
    small = c < 1e-6
    safe = np.where(small, 1.0, c)
    return np.where(small, 0.25 - c**2 / 48, np.tanh(safe / 2) / (2 * safe))


def _progress(total: int, show: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not show, desc="variational", leave=False)
