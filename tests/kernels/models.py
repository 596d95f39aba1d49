"""NumPy targets with known answers for kernel tests (no Stan compile needed)."""

import math

import numpy as np

from stanaccel.datasets import generate
from stanaccel.datasets.mvn_mean import exact_posterior
from stanaccel.kernels import FunctionDensity


def mvn_density(data: dict, beta: float = 1.0, indices=None) -> FunctionDensity:
    """The mvn_mean posterior (tempered by beta, on a subset of observations) in NumPy."""
    x = np.asarray(data["x"])
    if indices is not None:
        x = x[indices]
    prior_prec = np.linalg.inv(data["Sigma0"])
    noise_prec = np.linalg.inv(data["Sigma"])
    mu0 = np.asarray(data["mu0"])
    n, total = x.shape[0], x.sum(0) if x.shape[0] else np.zeros(len(mu0))

    def log_density(theta):
        d0 = theta - mu0
        quad = n * theta @ noise_prec @ theta - 2 * theta @ noise_prec @ total
        return -0.5 * d0 @ prior_prec @ d0 - 0.5 * beta * quad

    def gradient(theta):
        return -prior_prec @ (theta - mu0) - beta * (n * noise_prec @ theta - noise_prec @ total)

    return FunctionDensity(len(mu0), log_density, gradient)


def mvn_problem(N: int = 30, D: int = 2, seed: int = 3):
    """(data, exact mean, exact sd) of a small mvn_mean posterior."""
    data = generate("mvn_mean", N=N, D=D, seed=seed).data
    mean, cov = exact_posterior(data)
    return data, mean, np.sqrt(np.diag(cov))


def exact_level_draws(data: dict, beta: float, n: int, rng, indices=None) -> np.ndarray:
    """Exact draws from a tempered (or subsampled) mvn_mean posterior."""
    sub = dict(data)
    if indices is not None:
        sub["x"] = np.asarray(data["x"])[indices]
        sub["N"] = len(indices)
    mean, cov = exact_posterior({**sub, "beta": beta})
    return rng.multivariate_normal(mean, cov, size=n)


# A well-separated two-component mixture: weight 0.3 at -3, 0.7 at +3 (sd 0.5).
MIXTURE_WEIGHT_RIGHT = 0.7


def mixture_density() -> FunctionDensity:
    # Scalar arithmetic: the tempering tests evaluate it some 10^5 times, where SciPy's
    # logsumexp took 80% of their time.
    (left, right), sd, (log_left, log_right) = (-3.0, 3.0), 0.5, np.log([0.3, 0.7])
    log_norm = math.log(sd * math.sqrt(2 * math.pi))

    def parts(x):
        t = float(x[0])
        return (
            log_left - 0.5 * ((t - left) / sd) ** 2 - log_norm,
            log_right - 0.5 * ((t - right) / sd) ** 2 - log_norm,
        )

    def log_density(x):
        return float(np.logaddexp(*parts(x)))

    def gradient(x):
        a, b = parts(x)
        w_right = 0.5 * (1 + math.tanh((b - a) / 2))  # the right component's share, 1 / (1 + e^(a - b))
        t = float(x[0])
        return np.array([-((1 - w_right) * (t - left) + w_right * (t - right)) / sd**2])

    return FunctionDensity(1, log_density, gradient)


def broad_prior_density(scale: float = 5.0) -> FunctionDensity:
    return FunctionDensity(1, lambda x: -0.5 * (x[0] / scale) ** 2, lambda x: -x / scale**2)


# A posterior with two well-separated modes from data: y_n ~ N(theta^2, 1),
# theta ~ N(0.5, 1.5^2), true theta^2 = 4. The prior tips the weights toward +2.
SQUARE_PRIOR_MEAN, SQUARE_PRIOR_SD, SQUARE_NOISE_SD = 0.5, 1.5, 1.0


def square_data(n: int = 10, seed: int = 0) -> np.ndarray:
    return 4.0 + SQUARE_NOISE_SD * np.random.default_rng(seed).standard_normal(n)


def square_density(y: np.ndarray) -> FunctionDensity:
    """Posterior of theta given observations y (any subset; none gives the prior)."""

    def log_density(x):
        t = x[0]
        prior = -0.5 * ((t - SQUARE_PRIOR_MEAN) / SQUARE_PRIOR_SD) ** 2
        return prior - 0.5 * np.sum((y - t**2) ** 2) / SQUARE_NOISE_SD**2

    def gradient(x):
        t = x[0]
        prior = -(t - SQUARE_PRIOR_MEAN) / SQUARE_PRIOR_SD**2
        return np.array([prior + np.sum((y - t**2) * 2 * t) / SQUARE_NOISE_SD**2])

    return FunctionDensity(1, log_density, gradient)


def square_right_weight(y: np.ndarray) -> float:
    """Posterior probability of theta > 0, by quadrature."""
    grid = np.linspace(-4, 4, 400001)
    log_p = np.array([square_density(y).log_density(np.array([t])) for t in grid[::50]])
    fine = np.interp(grid, grid[::50], log_p)
    w = np.exp(fine - fine.max())
    return float(w[grid > 0].sum() / w.sum())
