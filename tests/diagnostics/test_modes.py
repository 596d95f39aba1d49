"""Separated modes from draws alone: warm-up chains that settled apart, and mass beyond them."""

import numpy as np

from stanaccel.diagnostics.modes import beyond_reference, chain_regions, mode_gap, modes_report


def chains_at(centres, draws=500, seed=0) -> np.ndarray:
    """One chain of N(centre, I) draws in 2-D per centre (chains, draws, 2)."""
    rng = np.random.default_rng(seed)
    return np.stack([np.asarray(c, dtype=float) + rng.standard_normal((draws, 2)) for c in centres])


def test_chains_in_one_mode_form_one_region():
    assert chain_regions(chains_at([(0, 0)] * 4)) == [[0, 1, 2, 3]]


def test_chains_in_modes_12_sd_apart_form_two_regions():
    chains = chains_at([(-6, 0), (6, 0), (-6, 0), (6, 0)])
    assert chain_regions(chains) == [[0, 2], [1, 3]]
    report = modes_report(chains)
    assert "2 separated regions (chains [0, 2] and [1, 3])" in report["message"]


def test_draws_in_a_mode_no_chain_visited_lie_beyond_the_reference():
    reference = chains_at([(6, 0)] * 4)
    both = np.concatenate([chains_at([(6, 0)], 700, seed=1)[0], chains_at([(-6, 0)], 300, seed=2)[0]])
    assert abs(beyond_reference(both, reference) - 0.3) < 0.02
    assert beyond_reference(chains_at([(6, 0)], 1000, seed=3)[0], reference) < 0.01
    assert "30% of the draws lie where no NUTS warm-up chain went" in modes_report(reference, both)["message"]
    assert modes_report(reference, chains_at([(6, 0)], 1000, seed=3)[0])["message"] == ""


def slow_chain(centre, draws, phi, seed) -> np.ndarray:
    """A stationary AR(1) chain of N(centre, I) in 2-D, autocorrelation ``phi``: a sampler moving slowly."""
    rng = np.random.default_rng(seed)
    out = np.empty((draws, 2))
    out[0] = rng.standard_normal(2)
    for t in range(1, draws):
        out[t] = phi * out[t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal(2)
    return out + np.asarray(centre, dtype=float)


def test_the_mode_gap_tells_slow_chains_in_one_mode_from_chains_in_two():
    # auto's limits: 3 within-chain sds and 6 standard errors, among chains with an ESS of 10 or more.
    limits = (10.0, 3.0, 6.0)
    slow = [slow_chain((0, 0), 400, 0.9, seed) for seed in range(8)]  # ESS about 20 each
    sds, z = mode_gap(slow, *limits)
    assert z < 6.0
    two = [*slow[:4], *(c + [0.0, 8.0] for c in slow[4:])]
    sds, z = mode_gap(two, *limits)
    assert sds > 3.0 and z > 6.0
    # Chains that have not mixed even where they are (a funnel's neck and mouth) say nothing: left out.
    stuck = [slow_chain((0, 0), 400, 0.999, seed) for seed in range(4)]
    assert mode_gap(stuck, *limits) == (0.0, 0.0)
    assert mode_gap(slow[:1], *limits) == (0.0, 0.0)
