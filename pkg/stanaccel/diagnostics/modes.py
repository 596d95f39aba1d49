"""Separated modes: chains that settled apart, and mass a tempering run found beyond them.

NUTS explores the mode it starts in. On a posterior whose modes are separated
by a region of low density, each chain stays where its warm-up took it:
every chain is a confident answer, and together they are a wrong one, whose
weights among the modes follow the starts. Two checks, from the draws alone:

- :func:`chain_regions`: groups the warm-up's chains by whether their
  draws overlap. More than one group says the chains settled in separated
  regions, so the posterior likely has several modes that NUTS cannot move
  between.
- :func:`mode_gap`: how far apart short chains of any samplers (``auto``'s
  pilots) settled, in standard errors that know each chain's ESS, so that
  chains moving slowly through one mode are not taken for chains in two.
- :func:`beyond_reference`: the share of a run's draws (the target level of a
  tempering run) farther from every reference draw (NUTS's warm-up draws) than
  those draws are from one another. A tempering run with mass there found a
  region that no NUTS chain visited.
- :func:`unvisited_modes`: which modes a cheap warm-up found (the ends of its
  runs from dispersed starts) no draw of the run came near. Chains that all
  settled in one of two modes agree with one another (R-hat says nothing),
  so this is what tells their run from a converged one.

"Overlap" and "farther" are measured on coordinates divided by their
within-chain sd. The unit is the reference's spacing: the 99th percentile of
its draws' distances to their nearest neighbour. A draw is apart when its
nearest reference draw is more than :data:`APART` spacings away.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from stanaccel.diagnostics import convergence

APART = 3.0
"""Spacings (the reference's 99th-percentile nearest-neighbour distance) beyond which a draw is apart."""

MOSTLY = 0.5
"""Share of a chain's draws apart from another chain's above which the two chains do not overlap."""

MAX_PER_CHAIN, MAX_DRAWS = 250, 2000
"""Draws kept (evenly spaced) per warm-up chain and of the run checked: nearest-neighbour queries
slow down with the dimension (4 s for 4 x 500 warm-up draws in 500 dimensions), and the checks need
only the regions' outlines."""


def within_chain_sd(chains: np.ndarray) -> np.ndarray:
    """Each coordinate's within-chain sd, pooled over chains: (chains, draws, dim) -> (dim,), 1 for 0."""
    sd = np.sqrt(np.mean(np.var(chains, axis=1), axis=0))
    return np.where(sd > 0, sd, 1.0)


def _spacing(points: np.ndarray) -> float:
    """The 99th percentile of each point's distance to its nearest other point."""
    distances, _ = cKDTree(points).query(points, k=2)
    return float(np.quantile(distances[:, 1], 0.99))


def chain_regions(chains: np.ndarray) -> list[list[int]]:
    """Groups of chains whose draws overlap, from draws (chains, draws, dim); one group when all do.

    Chains a and b overlap unless more than :data:`MOSTLY` of either's draws are more than
    :data:`APART` spacings from every draw of the other.
    """
    chains = np.asarray(chains, dtype=float)
    n = len(chains)
    scaled = chains / within_chain_sd(chains)
    unit = APART * _spacing(scaled.reshape(-1, scaled.shape[-1]))
    trees = [cKDTree(c) for c in scaled]
    linked = np.eye(n, dtype=bool)
    for a in range(n):
        for b in range(a + 1, n):
            apart_ab = np.mean(trees[b].query(scaled[a])[0] > unit)
            apart_ba = np.mean(trees[a].query(scaled[b])[0] > unit)
            linked[a, b] = linked[b, a] = max(apart_ab, apart_ba) <= MOSTLY
    groups: list[list[int]] = []
    for c in range(n):  # connected components
        touching = [g for g in groups if any(linked[c, other] for other in g)]
        merged = sorted({c, *(x for g in touching for x in g)})
        groups = [g for g in groups if g not in touching] + [merged]
    return sorted(groups)


def mode_gap(chains: list[np.ndarray], min_ess: float, gap: float, z_limit: float) -> tuple[float, float]:
    """How far apart chains settled: two chains' means of a coordinate, in sds and in standard errors.

    ``chains`` are (draws, dim) arrays of unconstrained draws (every chain of
    every pilot; longer ones are cut to the shortest). A chain whose worst
    coordinate's bulk ESS is below ``min_ess`` has not mixed even where it
    is and is left out. For each pair of chains and coordinate the difference
    of the means is measured in within-chain sds (the median over the
    chains) and in standard errors of the difference, sqrt(sd_a^2 / ESS_a +
    sd_b^2 / ESS_b): chains in one mode differ by a few errors however slowly
    they move, chains in two modes by many sds and many errors. Returns
    ``(sds, z)`` of the pair and coordinate farthest apart on both scales
    (the largest min(sds / gap, z / z_limit)): the chains settled apart when
    both exceed their limits. (0, 0) with fewer than two chains left.
    """
    n = min((len(c) for c in chains), default=0)
    kept = []
    for chain in chains:
        chain = np.asarray(chain[:n], dtype=float)
        moving = np.ptp(chain, axis=0) > 0
        ess = np.full(chain.shape[1], np.inf)
        ess[moving] = convergence.ess_bulk(chain[None][:, :, moving])
        if moving.any() and ess.min() >= min_ess:
            kept.append((chain.mean(axis=0), chain.std(axis=0), ess))
    if len(kept) < 2:
        return 0.0, 0.0
    means = np.array([m for m, _, _ in kept])
    sds_chains = np.array([sd for _, sd, _ in kept])
    error2 = sds_chains**2 / np.array([e for _, _, e in kept])
    sd = np.median(sds_chains, axis=0)
    diff = np.abs(means[:, None, :] - means[None, :, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.nan_to_num(diff / np.sqrt(error2[:, None, :] + error2[None, :, :]), posinf=0.0)
        sds = np.nan_to_num(diff / np.where(sd > 0, sd, np.inf))
    worst = np.unravel_index(np.argmax(np.minimum(sds / gap, z / z_limit)), z.shape)
    return float(sds[worst]), float(z[worst])


def beyond_reference(draws: np.ndarray, reference: np.ndarray) -> float:
    """The share of ``draws`` (n, dim) farther than :data:`APART` spacings from every draw of
    ``reference`` (chains, draws, dim)."""
    reference = np.asarray(reference, dtype=float)
    scale = within_chain_sd(reference)
    pooled = (reference / scale).reshape(-1, reference.shape[-1])
    distances, _ = cKDTree(pooled).query(np.asarray(draws, dtype=float) / scale)
    return float(np.mean(distances > APART * _spacing(pooled)))


def modes_report(warmup_chains: np.ndarray, draws: np.ndarray | None = None) -> dict:
    """What the two checks say, with a sentence for the log: ``regions`` (groups of warm-up chains),
    ``beyond`` (the share of ``draws`` beyond them, if given) and ``message`` ("" when nothing)."""
    warmup_chains = np.asarray(warmup_chains)
    warmup_chains = warmup_chains[:, :: -(-warmup_chains.shape[1] // MAX_PER_CHAIN)]
    regions = chain_regions(warmup_chains)
    report: dict = {"regions": regions}
    lines = []
    if len(regions) > 1:
        shown = " and ".join("[" + ", ".join(map(str, g)) + "]" for g in regions)
        lines.append(
            f"the warm-up's NUTS chains settled in {len(regions)} separated regions (chains {shown}): the "
            "posterior likely has several modes, which NUTS's chains cannot move between, so NUTS weights "
            "them by where its chains started; tempering (pt) moves between them"
        )
    if draws is not None:
        flat = np.asarray(draws).reshape(-1, warmup_chains.shape[-1])
        flat = flat[:: -(-len(flat) // MAX_DRAWS)]
        report["beyond"] = beyond_reference(flat, warmup_chains)
        if report["beyond"] > 0.01:
            lines.append(
                f"{report['beyond']:.0%} of the draws lie where no NUTS warm-up chain went: a region that "
                "NUTS started as the warm-up was would have missed"
            )
    report["message"] = "; ".join(lines)
    return report


def unvisited_modes(modes, draws) -> list[int]:
    """Which of ``modes`` (k, dim) no draw of ``draws`` (chains, draws, dim) is nearer to than to the others.

    Each draw belongs to its nearest mode, distances measured in the draws' within-chain sds: a mode that
    no draw belongs to was never visited (in high dimensions the draws lie far from every mode, but still
    nearest to their own).
    """
    modes = np.asarray(modes, dtype=float)
    draws = np.asarray(draws, dtype=float)
    scale = within_chain_sd(draws)
    flat = draws.reshape(-1, draws.shape[-1])
    flat = flat[:: -(-len(flat) // MAX_DRAWS)]
    _, nearest = cKDTree(modes / scale).query(flat / scale)
    return sorted(set(range(len(modes))) - set(nearest.tolist()))


def visited_modes_report(
    modes, found_by: str, draws, names: list[str], found_in: str = "the warm-up"
) -> dict:
    """Whether the run's ``draws`` (chains, draws, dim) visited every one of ``modes`` (k, dim), the separated
    modes that ``found_by`` (the runs of ``found_in``, for the message) ended at.

    Returns ``modes_found`` (k), ``found_by``, ``found_in``, ``unvisited`` (where each unvisited mode is:
    the coordinate, named by ``names``, farthest in sds from the draws' mean, and its value there; empty
    when every mode was visited) and ``message`` ("" when every mode was visited).
    """
    modes = np.asarray(modes, dtype=float)
    draws = np.asarray(draws, dtype=float)
    missed = unvisited_modes(modes, draws)
    mean, scale = draws.reshape(-1, draws.shape[-1]).mean(axis=0), within_chain_sd(draws)
    where = []
    for k in missed:
        j = int(np.argmax(np.abs(modes[k] - mean) / scale))
        where.append(f"{names[j]} = {modes[k, j]:.3g}, where the draws' mean is {mean[j]:.3g}")
    message = (
        f"{found_by} ended at {len(modes)} separated modes, and no draw of the run came near "
        f"{len(missed)} of them (unconstrained: {'; '.join(where)})"
        if missed
        else ""
    )
    return {"modes_found": len(modes), "found_by": found_by, "found_in": found_in, "unvisited": where,
            "message": message}  # fmt: skip
