"""A randomised policy over settings, and the fixed mixture kernel it defines for the sampling phase.

After Bayesian optimisation, Mahendran et al. do not keep only the best
settings: they draw settings with probability rising with the objective the
Gaussian process predicts, and the sampling phase mixes kernels with those
settings. The mixture's weights are fixed before sampling starts, so the
final chain does not adapt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import softmax

from stanaccel.kernels import Mixture
from stanaccel.tuning.bayesopt import TuningResult


def policy_probabilities(mean: np.ndarray, temperature: float = 10.0, scale: float = 100.0) -> np.ndarray:
    """p(theta) proportional to exp(scale * mean(theta) / temperature), over the points of ``mean``."""
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, not {temperature!r}")
    return softmax(scale * np.asarray(mean, dtype=float) / temperature)


class RandomisedPolicy:
    """Settings with weights: the components of the sampling phase's mixture kernel.

    Parameters
    ----------
    settings : list of dict
        Distinct settings.
    weights : sequence of float
        Their probabilities (normalised here).
    predicted : sequence of float, optional
        The objective the tuner's Gaussian process predicts for each.
    """

    def __init__(self, settings: list[dict], weights, predicted=None):
        if not settings:
            raise ValueError("a policy needs at least one setting")
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (len(settings),) or np.any(weights < 0) or not weights.sum() > 0:
            raise ValueError("a policy needs one non-negative weight per setting, not all zero")
        order = np.argsort(-weights, kind="stable")
        self.settings = [dict(settings[i]) for i in order]
        self.weights = weights[order] / weights.sum()
        self.predicted = None if predicted is None else np.asarray(predicted, dtype=float)[order]

    @classmethod
    def from_result(
        cls,
        result: TuningResult,
        *,
        temperature: float = 10.0,
        size: int = 1000,
        seed: int = 0,
        scale: float = 100.0,
    ) -> RandomisedPolicy:
        """Draw ``size`` settings, with replacement, from the tuner's candidates by their predicted objective.

        p(theta) is proportional to exp(``scale`` * mu(theta) / ``temperature``),
        mu the Gaussian process's posterior mean; the policy keeps each
        drawn setting once, weighted by how often it was drawn. The authors'
        code uses temperature 10 and 1000 draws, with the objective in units
        of the area under the autocorrelation function over 100 lags, a sum;
        :func:`~stanaccel.tuning.objectives.autocorrelation_objective` is a
        mean over the lags, so the default ``scale`` 100 makes temperature 10
        mean what it meant for them. Scale it to the objective in use.
        """
        if result.model is None or result.candidates is None:
            raise ValueError(
                f"a policy needs the Gaussian process of Bayesian optimisation, not {result.method}"
            )
        if size < 1:
            raise ValueError(f"size must be at least 1, not {size}")
        mean = result.model.predict(result.candidates)
        counts = np.random.default_rng(seed).multinomial(size, policy_probabilities(mean, temperature, scale))
        drawn = np.flatnonzero(counts)
        return cls(result.space.from_unit(result.candidates[drawn]), counts[drawn], mean[drawn])

    @classmethod
    def uniform(cls, settings: list[dict]) -> RandomisedPolicy:
        """Equal weight on each of ``settings`` (baselines such as uniform walk lengths)."""
        return cls(settings, np.ones(len(settings)))

    def table(self) -> list[dict[str, Any]]:
        """One row per setting, by decreasing weight: the settings, the weight, the predicted objective."""
        rows = []
        for i, settings in enumerate(self.settings):
            predicted = None if self.predicted is None else float(self.predicted[i])
            rows.append({**settings, "weight": float(self.weights[i]), "predicted": predicted})
        return rows

    def mixture(self, build: Callable[[dict], Any]) -> Mixture:
        """The sampling phase's kernel: a :class:`~stanaccel.kernels.Mixture` of ``build(s)`` by weight.

        Exact when every built kernel is, since the component is drawn
        independently of the state; it does not adapt.
        """
        return Mixture([build(dict(s)) for s in self.settings], self.weights)
