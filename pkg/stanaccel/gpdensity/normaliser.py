"""A Metropolis-Hastings move of the GP density Gibbs sampler along its unidentified normaliser.

Why. The sweep moves the level of g (and with it Z = E_pi[sigma(g)], lambda,
about N / Z, and the number of latent events M) only through lambda's and the
events' conditionals given g and g's given the events, each of which pins the
other to within about 1 / sqrt(N + M): M and lambda took tens to hundreds of
sweeps per independent draw at N = 300. This move changes all of them
together: it shifts g and mu0 by c, rescales lambda by e^{-kappa c} and thins
or adds latent events so that the events stay close to a Poisson process of
the new intensity, then accepts or refuses the whole by its exact ratio.

What it did (``benchmarks/density_gibbs_normaliser.py``, N = 300, three
densities): no consistent gain in M's and lambda's ESS per sweep (from 2 to
31 on one run, from 13 to 7 on another; single chains with an ESS of 2 to 30
are too short to say more), the density's estimate unchanged. M follows the
base measure's scale too (correlation -0.5 to -0.8; p is proportional to
sigma(g) pi, a second unidentified direction), which this move does not
change.

The target. With the Polya-Gamma marks integrated out (the sweep draws them
afresh before it uses them; the sampler redraws them after an accepted move, so
the state stays a joint draw) and the kernel and base measure held, the
augmented posterior of (lambda, mu0, g at the data D and the events E, E) is

    p(lambda) p(mu0) N(g | mu0 1, K) lambda^N prod_D sigma(g_n)
        * e^-lambda lambda^M prod_E pi(x_m) sigma(-g_m),

E's density taken against the Poisson reference measure of finite sets (the
events are unlabelled), p(lambda) = Gamma(a, b) (the sampler's
lambda^-1 exp(-beta lambda / N) is a = 0, b = beta / N) and p(mu0) Gaussian.

The move. Draw c ~ N(0, step^2); set lambda' = theta lambda with
theta = e^{-kappa c}, mu0' = mu0 + c, g' = g + c at every point (so
N(g' | mu0' 1, K) = N(g | mu0 1, K)); kappa in (0, 1] is a fixed exponent.

- c > 0 (Z up, fewer events): keep each event with probability
  r(g) = theta sigma(-g - c) / sigma(-g) (below 1), the thinning that takes a
  Poisson process of intensity lambda pi sigma(-g) to one of
  lambda' pi sigma(-g'), and remove the rest, R.
- c < 0 (Z down, more events): add Y, a Poisson process of intensity
  (lambda' - lambda) pi (points from pi, unthinned), with g at them drawn
  from the GP given g at the current points, then shifted by c.

Each is the other's reverse: the move with c from s removes R, the one with
-c from s' adds R back (the union of E' and R has the reference measure of
E, so no counting factor), and c's proposal is symmetric. For c > 0, with
k = |R|, the ratio target(s') q(s' -> s) / (target(s) q(s -> s')) times the
Jacobian theta of lambda -> theta lambda (the other coordinates shift) is

    theta^a e^{-b (lambda' - lambda)} * p(mu0 + c) / p(mu0)                    [priors, Jacobian]
    * prod_D theta sigma(g_n + c) / sigma(g_n)                                 [lambda^N, data]
    * [e^{-(lambda' - lambda)} theta^{M-k} lambda^-k prod_E' sigma(-g_m - c) / sigma(-g_m)
       / prod_R sigma(-g_r)]                                                   [events]
    * [e^{-(lambda - lambda')} (lambda - lambda')^k] / [prod_E' r(g_m) prod_R (1 - r(g_r))]
                                                                               [add R back / thin]

(the GP's density of g at R cancels the reverse move's draw of it, pi(x_r)
likewise). With r as above the events' and thinning's products over E'
cancel, and with sigma(-g) - theta sigma(-g - c)
= [(1 - theta) + e^g (e^c - theta)] / [(1 + e^g)(1 + e^{g + c})] what is left is

    log alpha(c > 0) = a log theta - b (lambda' - lambda) + log p(mu0 + c) - log p(mu0)
                       + sum_D [log theta + log(1 + e^-g_n) - log(1 + e^{-g_n - c})]
                       + sum_R [log(1 + e^g_r) + log(1 + e^{g_r + c}) - log(1 + e^g_r q)],
    q = (e^c - theta) / (1 - theta),

every term a function of values the state holds: no integral over the
domain (Z) appears, which is why the added events are unthinned. A move
with c < 0 from s to s' is accepted with exp(-log alpha) of its reverse
(c' = -c > 0 from s', removing Y).

kappa. Shifting g by c raises Z by about c Z E_p[sigma(-g)] (p the
density), so lambda ~ N / Z should fall by e^{-kappa c} with
kappa = E_p[sigma(-g)], which the data's mean of sigma(-g_n) estimates; with
kappa = 1 (exact where sigma(g) is small everywhere) the data's term has a
drift of about -c N E_p[sigma(g)] that refuses all but steps of the sweep's
own size. The sampler sets kappa to that mean and adapts the step (to
acceptance 0.3) during the warm-up, then fixes both, so the kept sweeps are
an exact Markov chain.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.stats import norm

from stanaccel.gpdensity.covariance import conditional_draw


def log_ratio_thinning(
    rate: float,
    mu0: float,
    g_data: np.ndarray,
    g_removed: np.ndarray,
    shift: float,
    exponent: float,
    rate_prior: tuple[float, float],
    mu0_prior: tuple[float, float],
) -> float:
    """log alpha of the move with ``shift`` c > 0 and ``exponent`` kappa from a state with ``rate``,
    ``mu0`` and ``g_data`` that removes the events whose g are ``g_removed`` (the module docstring
    derives it)."""
    shape, inverse_scale = rate_prior
    log_theta = -exponent * shift
    priors = (
        shape * log_theta
        - inverse_scale * rate * np.expm1(log_theta)
        + norm.logpdf(mu0 + shift, *mu0_prior)
        - norm.logpdf(mu0, *mu0_prior)
    )
    data = np.sum(log_theta + np.logaddexp(0.0, -g_data) - np.logaddexp(0.0, -g_data - shift))
    log_q = np.log(np.exp(shift) - np.exp(log_theta)) - np.log(-np.expm1(log_theta))
    g = g_removed
    removed = np.sum(np.logaddexp(0.0, g) + np.logaddexp(0.0, g + shift) - np.logaddexp(0.0, g + log_q))
    return float(priors + data + removed)


class NormaliserMove:
    """The move of the module docstring: ``move(state, data, rng)`` returns the next state and whether
    the proposal was accepted.

    Parameters
    ----------
    rate_prior : (a, b)
        lambda ~ Gamma(a, b) (shape, rate); the sampler's lambda^-1 exp(-beta lambda / N) is (0, beta / N).
    mu0_prior : (mean, sd)
    """

    def __init__(self, rate_prior: tuple[float, float], mu0_prior: tuple[float, float]):
        self.rate_prior = (float(rate_prior[0]), float(rate_prior[1]))
        self.mu0_prior = (float(mu0_prior[0]), float(mu0_prior[1]))

    def log_ratio_thinning(self, rate, mu0, g_data, g_removed, shift, exponent) -> float:
        return log_ratio_thinning(rate, mu0, g_data, g_removed, shift, exponent, self.rate_prior,
                                  self.mu0_prior)  # fmt: skip

    def __call__(self, state, data: np.ndarray, step: float, exponent: float, rng: np.random.Generator):
        """One move from ``state`` (a :class:`~stanaccel.gpdensity.gibbs.GibbsState`) given the data:
        shift c ~ N(0, ``step``^2), lambda rescaled by e^{-``exponent`` c}."""
        shift = float(rng.normal(0.0, step))
        new_rate = state.rate * np.exp(-exponent * shift)
        if shift > 0:
            keep = np.log(rng.random(len(state.events))) < _log_keep(state.g_events, shift, exponent)
            log_ratio = self.log_ratio_thinning(state.rate, state.mu0, state.g_data, state.g_events[~keep],
                                                shift, exponent)  # fmt: skip
            events, g_events = state.events[keep], state.g_events[keep] + shift
        else:
            added = state.base.sample(int(rng.poisson(new_rate - state.rate)), rng)
            points = np.vstack([data, state.events])
            g_points = np.concatenate([state.g_data, state.g_events])
            try:
                g_added = conditional_draw(state.kernel, points, g_points, added, state.mu0, rng,
                                           chol=state.chol, extra_jitter=0.0)  # fmt: skip
            except np.linalg.LinAlgError:
                return state, False  # the conditional covariance did not factorise: refused
            events = np.vstack([state.events, added])
            g_events = np.concatenate([state.g_events, g_added]) + shift
            log_ratio = -self.log_ratio_thinning(new_rate, state.mu0 + shift, state.g_data + shift,
                                                 g_added + shift, -shift, exponent)  # fmt: skip
        if not np.log(rng.random()) < log_ratio:
            return state, False
        points = np.vstack([data, events])
        return replace(
            state,
            events=events,
            g_data=state.g_data + shift,
            g_events=g_events,
            rate=new_rate,
            mu0=state.mu0 + shift,
            chol=np.linalg.cholesky(state.kernel(points)),
        ), True


def _log_keep(g: np.ndarray, shift: float, exponent: float) -> np.ndarray:
    """log r(g) = log[theta sigma(-g - c) / sigma(-g)] = -kappa c + log(1 + e^g) - log(1 + e^{g + c})."""
    return -exponent * shift + np.logaddexp(0.0, g) - np.logaddexp(0.0, g + shift)
