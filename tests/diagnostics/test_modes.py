"""Separated modes from draws alone: warm-up chains that settled apart, and mass beyond them."""

import numpy as np

from stanaccel.diagnostics.modes import beyond_reference, chain_regions, modes_report


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
