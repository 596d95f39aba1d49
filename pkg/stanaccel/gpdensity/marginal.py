"""g integrated out: the Gibbs sampler's updates of the kernel hyperparameters, mu0 and g as one block.

Given the Polya-Gamma marks omega and the latent events, the augmented
likelihood is Gaussian in g at the N + M points,

    prod_i exp(u_i g_i - omega_i g_i^2 / 2) = const * prod_i N(z_i | g_i, 1 / omega_i),  z_i = u_i / omega_i,

(u = 1/2 at the data, -1/2 at the events): GP regression on pseudo-observations z
with noise variances 1 / omega. So g, and with it mu0 ~ N(m, s^2), integrate
out in closed form: z ~ N(m 1, K + W^-1 + s^2 1 1^T), W = diag(omega).

Why the block. Metropolis-Hastings on the kernel hyperparameters given g at
all N + M points (the paper's update, a centred parameterisation) stops
moving as N + M grows: g at a thousand points close together pins the
lengthscale so tightly that every proposal is refused, and the lengthscale
stays where it started. Given only omega and the events, the pseudo-observations
are noisy (variance 1 / omega, about 4 and more), and the hyperparameters
keep a posterior wide enough for a random walk to cross. So each update
draws theta by Metropolis-Hastings on p(theta | omega, events) (g and mu0
integrated out), then mu0 from p(mu0 | theta, omega, events) (g integrated
out), then g from p(g | mu0, theta, omega, events): a collapsed Gibbs block,
exact for the joint posterior. It costs one Cholesky factorisation of
B = I + W^1/2 K W^1/2 per proposal, as the centred update did of K. The
random walk's step is adapted during the warm-up only (Robbins-Monro to
acceptance 0.3, then fixed), so the sampling phase is an exact Markov chain.

Drawing mu0 jointly with g is the same fix for mu0: given g at N + M points
it can only move by about amplitude / sqrt(number of lengthscales spanned)
per sweep, and it is strongly tied to g's level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve

from stanaccel.gpdensity.covariance import SquaredExponential

TARGET_ACCEPTANCE = 0.3


@dataclass(frozen=True)
class PseudoObservations:
    """The Gaussian form of the augmented likelihood: z_i = u_i / omega_i with noise variance 1 / omega_i.

    ``u`` is 1/2 at the data and -1/2 at the latent events.
    """

    omega: np.ndarray
    u: np.ndarray

    @classmethod
    def of(cls, omega_data: np.ndarray, omega_events: np.ndarray) -> PseudoObservations:
        u = np.concatenate([np.full(len(omega_data), 0.5), np.full(len(omega_events), -0.5)])
        return cls(np.concatenate([omega_data, omega_events]), u)


class Marginal:
    """g ~ N(mu0 1, K), z ~ N(g, W^-1), mu0 ~ N(m, s^2) given the pseudo-observations, factorised once.

    Everything comes from B = I + W^1/2 K W^1/2 = C C^T, whose eigenvalues are
    at least 1 however small some omega are: (K + W^-1)^-1 = W^1/2 B^-1 W^1/2.
    """

    def __init__(self, K: np.ndarray, observations: PseudoObservations, mu0_prior: tuple[float, float]):
        self.K = K
        self.mu0_prior = mu0_prior
        self.root = np.sqrt(observations.omega)
        self.scaled = observations.u / self.root  # W^1/2 z
        B = self.root[:, None] * K * self.root[None, :]
        B[np.diag_indices_from(B)] += 1.0
        self.C = np.linalg.cholesky(B)
        x = self._solve(np.column_stack([self.root, self.scaled]))
        self.one_one = float(self.root @ x[:, 0])  # 1^T (K + W^-1)^-1 1
        self.one_z = float(self.root @ x[:, 1])  # 1^T (K + W^-1)^-1 z
        self.z_z = float(self.scaled @ x[:, 1])  # z^T (K + W^-1)^-1 z
        self.log_det_B = 2 * float(np.sum(np.log(np.diag(self.C))))

    def _solve(self, v: np.ndarray) -> np.ndarray:
        return cho_solve((self.C, True), v)

    def mu0_conditional(self) -> tuple[float, float]:
        """Mean and sd of mu0 | theta, omega, events, with g integrated out."""
        m, s = self.mu0_prior
        precision = 1 / s**2 + self.one_one
        return (m / s**2 + self.one_z) / precision, 1 / np.sqrt(precision)

    def log_marginal(self) -> float:
        """ln N(z | m 1, K + W^-1 + s^2 1 1^T): the pseudo-observations with g and mu0 integrated out."""
        m, s = self.mu0_prior
        centred = self.z_z - 2 * m * self.one_z + m**2 * self.one_one  # r^T (K + W^-1)^-1 r, r = z - m 1
        cross = self.one_z - m * self.one_one
        shrink = 1 + s**2 * self.one_one
        quadratic = centred - s**2 * cross**2 / shrink  # Sherman-Morrison for the rank-one s^2 1 1^T
        log_det = self.log_det_B - np.sum(np.log(self.root**2)) + np.log(shrink)
        return float(-0.5 * quadratic - 0.5 * log_det - 0.5 * len(self.root) * np.log(2 * np.pi))

    def draw_mu0(self, rng: np.random.Generator) -> float:
        mean, sd = self.mu0_conditional()
        return float(rng.normal(mean, sd))

    def draw_g(self, mu0: float, chol: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """g | mu0, theta, omega, events by Matheron's rule: a prior draw f ~ N(0, K) (``chol``: the lower
        Cholesky factor of K), corrected by the regression of the residual z - mu0 - f - eps,
        eps ~ N(0, W^-1). Gives N(mu0 + K (K + W^-1)^-1 (z - mu0), (W + K^-1)^-1) exactly."""
        f = chol @ rng.standard_normal(len(self.root))
        residual = self.scaled - self.root * (mu0 + f) - rng.standard_normal(len(self.root))
        return mu0 + f + self.K @ (self.root * self._solve(residual))

    def g_conditional(self, mu0: float) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of g | mu0, theta, omega, events (for tests: O(n^3) more than a draw)."""
        P = self.root[:, None] * self._solve(np.diag(self.root))
        mean = mu0 + self.K @ (self.root * self._solve(self.scaled - mu0 * self.root))
        return mean, self.K - self.K @ P @ self.K


@dataclass(frozen=True)
class KernelUpdate:
    """One random-walk Metropolis-Hastings update of the kernel on p(theta | omega, events)."""

    kernel: SquaredExponential
    marginal: Marginal
    accepted: bool


def update_kernel(
    kernel: SquaredExponential,
    marginal: Marginal,
    points: np.ndarray,
    observations: PseudoObservations,
    log_prior: Callable[[SquaredExponential], float],
    step: float,
    rng: np.random.Generator,
) -> KernelUpdate:
    """Propose log theta' = log theta + step * N(0, I); accept by the marginal of the pseudo-observations.

    ``marginal`` is the current kernel's; the returned one is the kept kernel's.
    """
    proposal = SquaredExponential.from_log_parameters(
        kernel.log_parameters() + step * rng.standard_normal(len(kernel.log_parameters()))
    )
    try:
        proposed = type(marginal)(proposal(points), observations, marginal.mu0_prior)
    except np.linalg.LinAlgError:
        return KernelUpdate(kernel, marginal, False)  # no factorisation at the proposal: refused
    log_ratio = proposed.log_marginal() + log_prior(proposal) - marginal.log_marginal() - log_prior(kernel)
    if np.log(rng.random()) < log_ratio:
        return KernelUpdate(proposal, proposed, True)
    return KernelUpdate(kernel, marginal, False)


def adapted_step(step: float, accepted: bool, count: int, target: float = TARGET_ACCEPTANCE) -> float:
    """Robbins-Monro on the log step toward the target acceptance; ``count``: the updates so far."""
    return float(step * np.exp((float(accepted) - target) / (count + 1) ** 0.6))
