"""The benchmark's fixed parts: the forcing, the true field, the sensors, and simulated data.

As in the elliptic inverse problem of Cui, Law and Marzouk (DILI, 2016),
used again by the Deep MCMC paper, and as in the published code of that
benchmark:

- forcing f: four Gaussian plumes of standard deviation 0.05 centred at
  (0.3, 0.3), (0.7, 0.3), (0.7, 0.7), (0.3, 0.7) with weights 2, -3, 3, -2,
  each ``w / (sqrt(2 pi) 0.05) exp(-|s - c|^2 / (2 0.05^2))`` (the published
  code's normalisation). The weights sum to zero, so f is compatible with the
  no-flux boundaries;
- true log-transmissivity u0: -1 on two regions, 0 elsewhere. The regions
  are the published code's: the rectangle [0.6, 0.8] x [0.2, 0.4] and the
  quarter ring centred at (0.8, 0.2) with radii 0.5 to 0.6, x <= 0.8, y >= 0.2
  (an arc from (0.2, 0.2) up to (0.8, 0.8), the shape of the paper's Figure 4);
- 25 sensors on the grid {0.2, 0.3, ..., 0.6}^2;
- data: p at the sensors solved on a mesh twice as fine as the inference
  mesh, plus Gaussian noise whose standard deviation is set by a regime.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stanaccel.pde.solver import EllipticSolver

PLUME_CENTRES = np.array([[0.3, 0.3], [0.7, 0.3], [0.7, 0.7], [0.3, 0.7]])
PLUME_WEIGHTS = np.array([2.0, -3.0, 3.0, -2.0])
PLUME_SD = 0.05
SENSOR_GRID = np.round(np.arange(0.2, 0.65, 0.1), 10)
SENSORS = np.array([[x, y] for y in SENSOR_GRID for x in SENSOR_GRID])
SNR = 10.0
NOISE_REGIMES = ("truth", "prior", "observations")


def plume_source(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The forcing f(x, y): four weighted Gaussian plumes."""
    value = np.zeros(np.broadcast(x, y).shape)
    for (cx, cy), weight in zip(PLUME_CENTRES, PLUME_WEIGHTS, strict=True):
        squared = (x - cx) ** 2 + (y - cy) ** 2
        value += weight / (np.sqrt(2 * np.pi) * PLUME_SD) * np.exp(-0.5 * squared / PLUME_SD**2)
    return value


def true_log_transmissivity(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """u0(x, y): -1 on the rectangle and on the quarter ring, 0 elsewhere."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rectangle = (0.6 <= x) & (x <= 0.8) & (0.2 <= y) & (y <= 0.4)
    radius2 = (x - 0.8) ** 2 + (y - 0.2) ** 2
    ring = (0.5**2 <= radius2) & (radius2 <= 0.6**2) & (x <= 0.8) & (y >= 0.2)
    return np.where(rectangle | ring, -1.0, 0.0)


def benchmark_solver(n: int, degree: int = 1, formulation: str = "pinned") -> EllipticSolver:
    """The solver with the benchmark's forcing and sensors on an n x n mesh."""
    return EllipticSolver(n, degree, plume_source, SENSORS, formulation)


@dataclass
class ObservedData:
    """Simulated observations with their noise.

    Attributes
    ----------
    values : ndarray
        Noisy p at the sensors.
    noise_free : ndarray
        p at the sensors from the true field, on the fine mesh.
    noise_sd : float
    regime : str
        How ``noise_sd`` was set (see :func:`noise_sd`).
    """

    values: np.ndarray
    noise_free: np.ndarray
    noise_sd: float
    regime: str


def noise_sd(regime: str, noise_free: np.ndarray, prior=None, rng=None, snr: float = SNR) -> float:
    """The noise standard deviation for a signal-to-noise ratio, by regime.

    The paper defines SNR = max_s u(s) / sd. Read literally with the truth it is
    degenerate (max u0 = 0), so three readings are offered:

    ``"truth"``
        sd = max_s |u0(s)| / SNR = 0.1 (the scale of the true field).
    ``"prior"``
        sd = E[max_s u(s)] / SNR for u drawn from the prior (100 draws), as the
        published code of the benchmark does (it draws on the data mesh, this
        on the prior's mesh, the inference mesh). Needs ``prior`` and ``rng``.
    ``"observations"``
        sd = max |p at the sensors| / SNR, the usual signal-to-noise reading.
    """
    if regime == "truth":
        return 1.0 / snr  # max |u0| is 1: u0 takes the values -1 and 0
    if regime == "prior":
        if prior is None or rng is None:
            raise ValueError("the 'prior' noise regime needs the prior and a random generator")
        draws = prior.sample(rng, 100)
        return float(np.mean(np.max(draws, axis=1))) / snr
    if regime == "observations":
        return float(np.max(np.abs(noise_free))) / snr
    raise ValueError(f"noise regime must be one of {NOISE_REGIMES}, not {regime!r}")


def simulate_data(n: int, degree: int, regime: str, rng: np.random.Generator, prior=None) -> ObservedData:
    """Noisy observations of the true field, solved on a (2n) x (2n) mesh of the same degree.

    ``prior`` (on the inference mesh) is needed by the ``"prior"`` regime only.
    """
    if regime not in NOISE_REGIMES:
        raise ValueError(f"noise regime must be one of {NOISE_REGIMES}, not {regime!r}")
    fine = benchmark_solver(2 * n, degree)
    noise_free = fine.observe(true_log_transmissivity(*fine.nodes))
    sd = noise_sd(regime, noise_free, prior, rng)
    values = noise_free + sd * rng.standard_normal(noise_free.shape)
    return ObservedData(values, noise_free, sd, regime)
