"""Funnels: parameters whose spread grows (or shrinks) with another's, from the draws alone.

A hierarchical model written centred, ``theta ~ normal(mu, tau)``, puts its
group parameters in a funnel: where ``tau`` is near 0 they are squeezed
together, where it is large they spread out. No one step size fits both
ends, so NUTS's trajectories there diverge or shrink, and every fixed-step
kernel mixes slowly in ``tau``. The cure is the non-centred
parameterisation, ``theta = mu + tau * z`` with ``z ~ normal(0, 1)``; but
where the data pin each ``theta`` down (many observations per group) it
is the non-centred form that makes the funnel, inverted: ``z = (theta - mu)
/ tau`` shrinks as ``tau`` grows, and the centred form is the cure.

:func:`find_funnel` reads both from unconstrained draws, where a scale is
s = log tau:

- centred: for each coordinate s and every other k, the correlation between
  s and log |x_k - median x_k|, the log of k's distance from its centre. In
  a centred funnel it is sd(s) / sqrt(sd(s)^2 + pi^2 / 8) (0.67 where
  sd(log tau) = 1); in a Gaussian, however correlated, about 0, since its
  spread does not depend on the other coordinates' values.
- inverted: z_k = (theta_k - mu) / tau with theta_k and mu pinned down is
  about c_k exp(-s), so log |x_k| falls with s on a line of slope -1,
  closely (correlation below -:data:`INVERTED_CORRELATION`).

Two or more coordinates coupled to one s make a funnel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

FUNNEL_CORRELATION = 0.3
"""The smallest correlation of s with a log spread it moves: sd(log tau) about 0.35 (Neal's funnel's is 0.5,
a correlation of 0.41); 6 standard errors of a correlation over a pilot's 400 draws."""
INVERTED_CORRELATION = 0.5
"""How closely log |x_k| must fall with s, on a slope within :data:`INVERTED_SLOPE`, in an inverted funnel."""
INVERTED_SLOPE = (-1.5, -0.5)
"""The slopes of log |x_k| on s taken for z_k = c_k / tau (slope -1 where s = log tau)."""
FUNNEL_MIN_COUPLED = 2
"""The fewest coordinates whose spread must move with s: one alone is a curved pair, not a funnel."""


@dataclass(frozen=True)
class Funnel:
    """A funnel found in the draws: ``scale``, the coordinates whose spread moves with it, and how.

    Attributes
    ----------
    scale : str
        The coordinate (unconstrained) the spreads move with: a log scale such as ``tau``.
    coupled : list of str
        The coordinates whose log distance from their centre correlates with it.
    correlation : float
        The mean correlation over ``coupled``: positive where their spread
        grows with ``scale`` (a centred funnel), negative where their size
        falls as it grows (an inverted one, from a non-centred
        parameterisation).
    """

    scale: str
    coupled: list[str]
    correlation: float

    @property
    def centred(self) -> bool:
        """Whether the spread grows with the scale (the centred form's funnel)."""
        return self.correlation > 0

    def message(self) -> str:
        """What the funnel is and the change to the program that removes it."""
        names = ", ".join(self.coupled[:4])
        if len(self.coupled) > 4:
            names += f", ... ({len(self.coupled)} in all)"
        if self.centred:
            return (
                f"a funnel: the spread of {names} grows with {self.scale} "
                f"(correlation {self.correlation:.2f}), "
                f"so where {self.scale} is small no one step size fits, which holds the samplers back; "
                "write them non-centred (theta = mu + tau * z with z ~ normal(0, 1))"
            )
        return (
            f"an inverted funnel: {names} fall as 1 / {self.scale} (correlation {self.correlation:.2f} on "
            "the log scale): the data pin down what they scale, so the non-centred form fights them; "
            "write those parameters centred (theta ~ normal(mu, tau))"
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "centred": self.centred, "message": self.message()}


def find_funnel(
    draws: np.ndarray, names: list[str], scales: np.ndarray | None = None, limit: float = FUNNEL_CORRELATION
) -> Funnel | None:
    """The strongest funnel in unconstrained ``draws`` (chains, draws, dim) or (draws, dim), or None.

    ``scales`` marks the coordinates that may be an inverted funnel's scale:
    the logs of bounded scales (:meth:`stanaccel.stan.StanModel.log_scale_coordinates`).
    Without it every coordinate may be, and two correlated coordinates far
    from 0 can pass for an inverted funnel of a third (log |x| is then
    nearly linear in each). A centred funnel's scale may be any coordinate
    (Neal's funnel writes it as a log variance, unbounded): a Gaussian's
    spread does not move with its coordinates, however correlated.

    For each coordinate s, the coordinates k whose log spread grows with s
    (correlation above ``limit``), and those whose log size falls with it
    on a slope near -1; s with at least :data:`FUNNEL_MIN_COUPLED` of either
    and the largest mean |correlation| is the funnel's scale.
    """
    x = np.asarray(draws, dtype=float).reshape(-1, np.shape(draws)[-1])
    if x.shape[1] < FUNNEL_MIN_COUPLED + 1 or x.shape[0] < 20:
        return None
    tiny = 1e-12 * (np.std(x, axis=0) + 1e-300)
    standard = _standardised(x)
    spread = np.log(np.abs(x - np.median(x, axis=0)) + tiny)
    grows = standard.T @ _standardised(spread) / x.shape[0]  # [s, k]: corr(x_s, log spread of x_k)
    size = np.log(np.abs(x) + tiny)
    falls = standard.T @ _standardised(size) / x.shape[0]  # [s, k]: corr(x_s, log |x_k|)
    slope = falls * size.std(axis=0)[None, :] / np.where(x.std(axis=0) > 0, x.std(axis=0), np.inf)[:, None]
    np.fill_diagonal(grows, 0.0)
    np.fill_diagonal(falls, 0.0)
    best: Funnel | None = None
    scales = np.ones(x.shape[1], dtype=bool) if scales is None else np.asarray(scales, dtype=bool)
    for s in range(x.shape[1]):
        centred = np.flatnonzero(np.nan_to_num(grows[s]) > limit)
        inverted = np.flatnonzero(
            (np.nan_to_num(falls[s]) < -INVERTED_CORRELATION)
            & (slope[s] > INVERTED_SLOPE[0])
            & (slope[s] < INVERTED_SLOPE[1])
            & scales[s]
        )
        for coupled, r in ((centred, grows), (inverted, falls)):
            if len(coupled) < FUNNEL_MIN_COUPLED:
                continue
            mean = float(np.mean(r[s, coupled]))
            if best is None or abs(mean) > abs(best.correlation):
                best = Funnel(names[s], [names[k] for k in coupled], mean)
    return best


def _standardised(columns: np.ndarray) -> np.ndarray:
    """Each column less its mean, over its sd (0 where constant)."""
    centred = columns - columns.mean(axis=0)
    sd = centred.std(axis=0)
    return np.divide(centred, sd, out=np.zeros_like(centred), where=sd > 0)
