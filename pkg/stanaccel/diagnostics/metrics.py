"""Convergence and efficiency figures from draws (ArviZ, rank-normalised).

Efficiency is ESS per second: the smallest bulk ESS over all scalar
parameters divided by the wall time the method needed (see DESIGN.md).

Whether a run converged is decided here and nowhere else
(:func:`convergence_warnings`), and so is whether a method's own statistics
say that it mixes (:func:`method_warnings`); every output (the command line,
the workflow's console lines, ``metrics.json``, the HTML report) shows their
reasons (:func:`warning_block`).
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pandas

from stanaccel.diagnostics import convergence
from stanaccel.diagnostics._arviz import az, numpy_path
from stanaccel.diagnostics.convergence import Diagnostics, diagnose


def summary(idata: az.InferenceData, var_names: list[str] | None = None) -> pandas.DataFrame:
    """ArviZ's summary table (mean, sd, HDI, MCSE, ESS bulk and tail, R-hat), with its rounding.

    The same numbers as ``arviz.summary`` (its rank-normalised estimators),
    computed over all the parameters at once (:mod:`~stanaccel.diagnostics.convergence`);
    a parameter with a NaN draw has NaN throughout, its HDI too.

    Raises
    ------
    ValueError
        The posterior has no draws (a run stopped in its warm-up): the message says so.
    """
    posterior = idata.posterior if var_names is None else idata.posterior[var_names]
    check_draws(posterior, "summarise")
    found, names = _diagnosed(posterior)
    prob = az.rcParams["stats.ci_prob"]
    columns = {
        "mean": found.mean,
        "sd": found.sd,
        f"hdi_{100 * (1 - prob) / 2:g}%": found.hdi_lower,
        f"hdi_{100 * (1 + prob) / 2:g}%": found.hdi_upper,
        "mcse_mean": found.mcse_mean,
        "mcse_sd": found.mcse_sd,
        "ess_bulk": found.ess_bulk,
        "ess_tail": found.ess_tail,
        "r_hat": found.rhat,
    }
    table = pandas.DataFrame(columns, index=[name.replace(",", ", ") for name in names])
    return table.round({name: {"ess_bulk": 0, "ess_tail": 0, "r_hat": 2}.get(name, 3) for name in columns})


_last: list = []
"""The last posterior's diagnostics, with its draws' CRC-32 and names: a run's summary and metrics (and
its report) compute them once, and a posterior changed in place since is computed again."""


def _diagnosed(posterior) -> tuple[Diagnostics, list[str]]:
    """:func:`~stanaccel.diagnostics.convergence.diagnose` of every scalar of ``posterior`` (an ArviZ
    dataset), and their names (``b[1,2]``); the last posterior's are kept, checked by a digest of its draws.
    """
    draws, names = scalar_draws(posterior)
    digest = (zlib.crc32(memoryview(np.ascontiguousarray(draws)).cast("B")), draws.shape)
    if _last and _last[0] == (digest, names):
        return _last[1], names
    found = diagnose(draws, az.rcParams["stats.ci_prob"])
    _last[:] = [(digest, names), found]
    return found, names


def scalar_draws(posterior) -> tuple[np.ndarray, list[str]]:
    """The draws of every scalar of ``posterior`` as one array (chains, draws, scalars), and their names."""
    parts, names = [], []
    for name, array in posterior.data_vars.items():
        values = np.asarray(array.values, dtype=float)
        parts.append(values.reshape(values.shape[0], values.shape[1], -1))
        if array.ndim == 2:
            names.append(name)
            continue
        dims = array.dims[2:]
        for index in np.ndindex(values.shape[2:]):  # named by coordinates, as ArviZ names its rows
            labels = [
                array[dim].values[i] if dim in array.coords else i for dim, i in zip(dims, index, strict=True)
            ]
            names.append(f"{name}[{','.join(map(str, labels))}]")
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    return (np.concatenate(parts, axis=2) if parts else np.empty((chains, draws, 0))), names


def check_draws(posterior, what: str) -> None:
    """Raise ``ValueError`` where ``posterior`` (an ArviZ dataset) has no draws: nothing to ``what``."""
    if posterior.sizes.get("draw", 0) == 0:
        raise ValueError(
            f"no draws to {what}: the run was stopped before its first kept draw (interrupted in its "
            "warm-up), so the posterior has 0 draws per chain; run it again and let the warm-up finish"
        )


DRAWS_PER_CHAIN_MIN = 4
"""Kept draws per chain below which R-hat and ESS are not defined: ArviZ's rank-normalised estimates
need 4 (split R-hat halves each chain); with fewer they are NaN, and the run is not converged."""

RHAT_MAX = 1.01
"""The largest worst-parameter R-hat of a converged run: Vehtari et al. (2021) recommend
rank-normalised split R-hat below 1.01, as ArviZ and CmdStan's ``diagnose`` check."""

ESS_PER_CHAIN_MIN = 100
"""Bulk and tail ESS needed per chain (Vehtari et al. 2021: 100 per chain, so 400 for
four chains), below which neither the estimates' Monte Carlo errors nor R-hat can be trusted."""

SWAP_ACCEPTANCE_MIN = 0.1
"""Swap acceptance of a neighbouring pair of levels (PT, SPT) below which the pair is a
bottleneck: a state needs about 1 / acceptance attempts to cross it, so the coldest level
rarely receives what the hot levels found. Tuned ladders aim at 0.2-0.4 (Atchade et al. 2011)."""

TRAJECTORY_ACCEPTANCE_MIN = 0.1
"""Tempered-transition trajectory acceptance (TT, STT, tt-approx) below which a chain takes a
tempered move less than once in ten iterations while paying for every trajectory; the
acceptance falls fast as the ladder gets coarser (Neal 1996), so more levels help."""

INNER_ACCEPTANCE_MIN = 0.05
"""Acceptance of a tempering level's own moves (PT, SPT) below which its replica hardly moves:
random-walk Metropolis is tuned to about 0.23 and HMC to 0.65-0.8, so one in twenty is far off.
All levels stuck at one point swap with acceptance 1 and count round trips, meaning nothing."""

REJECTED_LABEL = (
    "proposals rejected by the program (its log density raised an error there, such as a reject(), "
    "or was not finite; rejections, not divergences)"
)
"""The line that counts ``rejected_by_program``: the program said no to a point, which is no sign that
the sampler could not follow the posterior (a divergence) nor that the run has not converged."""

ACCEPTANCE_MIN = 0.01
"""Mean acceptance below which a run's chains hardly moved: fewer than one proposal in a hundred was
taken, so every estimate rests on a few points; the proposals reach too far (a step or scale too large)."""

MARK_ACCEPTANCE_MIN = 0.05
"""Mark-move acceptance of the discretizing chain (DC) below which the chain moves on the
posterior in fewer than one in twenty iterations, however well its inner chain moves on the
approximation: the approximation is too far from the posterior (or ``jump`` too large)."""

EVIDENCE_MEANING = (
    "log Z(beta=1) - log Z(beta=0): the log evidence p(data) only if beta multiplies the whole likelihood "
    "and the beta=0 level is the prior"
)
"""What the stepping-stone number of ``pt`` is, said wherever it is shown: the ratio of the normalisers of
the ladder's ends, which is the evidence only for a program written so (a likelihood partly outside
``beta`` leaves that part in Z(0))."""

METHOD_STATISTICS = {  # key in a kernel's summary -> (label, how chains combine)
    "swap_acceptance": ("swap acceptance per neighbouring pair of levels", "mean"),
    "communication_barrier": ("communication barrier (sum of swap rejection rates)", "mean"),
    "round_trips": ("round trips of the hottest and coldest level (all chains)", "sum"),
    "round_trip_rate": ("round trips per scan", "mean"),
    "limit_round_trip_rate": ("round trips per scan in theory, 1 / (2 + 2 barrier), many levels", "mean"),
    "log_evidence": (f"{EVIDENCE_MEANING}; by stepping stone over the ladder", "mean"),
    "log_evidence_mcse": ("log Z(beta=1) - log Z(beta=0): its Monte Carlo standard error", "mcse"),
    "inner_acceptance": ("inner acceptance per level", "mean"),
    "tt_acceptance": ("tempered-transition acceptance", "mean"),
    "betas": ("ladder (beta per level)", "first"),
    "move_acceptance": ("mark acceptance (moves accepted on the posterior)", "mean"),
    "cache_hit_fraction": ("cache hits (share of exact evaluations saved)", "mean"),
    "cache_hits": ("cache hits (all chains)", "sum"),
    "exact_evaluations": ("exact evaluations (all chains)", "sum"),
    "proposal_acceptance": ("independence proposals accepted (its efficiency)", "mean"),
}
"""The kernel statistics shown for a run (from each chain's kernel ``summary``): their labels,
and whether the shown value is the mean over chains, the sum, the first chain's, or (``mcse``) the
standard error of the mean over chains of independent estimates, sqrt(sum of squares) / chains."""


PROPOSAL_ACCEPTANCE_MIN = 0.1
"""Acceptance of an independence sampler (IMH) below which its proposal, fitted to the warm-up,
covers the posterior poorly: each accepted proposal is a fresh point, so the acceptance is the
sampler's efficiency, and below one in ten the chain sticks for long stretches where pi / q is large."""


def _worst(values: dict[str, float], largest: bool) -> float:
    """The largest (or smallest) value, NaN (a constant quantity) ignored; NaN if there is no other."""
    finite = [v for v in values.values() if not math.isnan(v)]
    if not finite:
        return float("nan")
    return max(finite) if largest else min(finite)


def _worst_name(values: dict[str, float], worst: float) -> str:
    return next((name for name, value in values.items() if value == worst), "")


def convergence_metrics(
    idata: az.InferenceData,
    *,
    wall_seconds: float | None = None,
    sampling_seconds: float | None = None,
    gradient_evaluations: int | None = None,
    var_names: list[str] | None = None,
    max_depth: int | None = None,
) -> dict[str, Any]:
    """ESS (bulk, tail), R-hat, ESS per second and whether the run converged.

    Parameters
    ----------
    max_depth : int, optional
        NUTS's largest tree depth; default the InferenceData's ``max_depth``
        attribute (Stan NUTS runs record it). With ``tree_depth`` in the
        sample stats it counts the transitions that hit it.

    Returns
    -------
    dict
        JSON-ready: the worst case over parameters (``ess_bulk_min``,
        ``ess_tail_min``, ``rhat_max``; a constant quantity's NaN is left
        out), ``ess_min``, the smaller of the two ESS (the headline ESS that
        every per-second and per-gradient figure divides: bulk ESS alone
        flatters an antithetic sampler), per-parameter values,
        ``ess_per_second`` (total time) and ``ess_per_second_sampling``;
        ``divergences``, ``max_tree_depth_hits``
        and ``rejected_by_program`` (proposals where the log density raised
        an error or was not finite: the sample stats' ``failed``) where the
        sample stats have them;
        ``converged`` (no reason in :func:`convergence_warnings`) and
        ``warnings``, the reasons.
    """
    posterior = idata.posterior if var_names is None else idata.posterior[var_names]
    check_draws(posterior, "measure")
    n_chains, n_draws = posterior.sizes["chain"], posterior.sizes["draw"]
    found, names = _diagnosed(posterior)
    ess_bulk = dict(zip(names, found.ess_bulk.tolist(), strict=True))
    ess_tail = dict(zip(names, found.ess_tail.tolist(), strict=True))
    rhat = dict(zip(names, found.rhat.tolist(), strict=True))
    bulk_min, tail_min = _worst(ess_bulk, largest=False), _worst(ess_tail, largest=False)
    metrics: dict[str, Any] = {
        "chains": int(n_chains),
        "draws_per_chain": int(n_draws),
        "ess_min": _worst({"bulk": bulk_min, "tail": tail_min}, largest=False),
        "ess_bulk_min": bulk_min,
        "ess_tail_min": tail_min,
        "rhat_max": _worst(rhat, largest=True),
        "ess_bulk": ess_bulk,
        "ess_tail": ess_tail,
        "rhat": rhat,
    }
    stats = getattr(idata, "sample_stats", None)
    if stats is not None and "diverging" in stats:
        metrics["divergences"] = int(stats["diverging"].values.sum())
    if stats is not None and "failed" in stats:
        metrics["rejected_by_program"] = int(stats["failed"].values.sum())
    if max_depth is None:
        max_depth = posterior.attrs.get("max_depth")
    if stats is not None and "tree_depth" in stats and max_depth is not None:
        metrics["max_depth"] = int(max_depth)
        metrics["max_tree_depth_hits"] = int((stats["tree_depth"].values >= int(max_depth)).sum())
    if wall_seconds is not None:
        metrics["wall_seconds"] = wall_seconds
        metrics["ess_per_second"] = metrics["ess_min"] / wall_seconds
    if sampling_seconds is not None:
        metrics["sampling_seconds"] = sampling_seconds
        metrics["ess_per_second_sampling"] = metrics["ess_min"] / sampling_seconds
    if gradient_evaluations is not None:
        metrics["gradient_evaluations"] = int(gradient_evaluations)
        metrics["ess_per_1000_gradients"] = 1000 * metrics["ess_min"] / max(gradient_evaluations, 1)
    return judge(metrics)


def judge(metrics: dict[str, Any]) -> dict[str, Any]:
    """Set ``converged`` and ``warnings`` of ``metrics`` (in place, and return it).

    ``warnings`` are the reasons of :func:`convergence_warnings`, then those of
    :func:`method_warnings` on ``metrics["method_statistics"]`` where there
    are such; ``converged`` is True when there is no reason of the first kind.
    """
    reasons = convergence_warnings(metrics)
    metrics["converged"] = not reasons
    metrics["warnings"] = reasons + method_warnings(metrics.get("method_statistics") or {})
    return metrics


def convergence_warnings(metrics: dict[str, Any]) -> list[str]:
    """Why a run has not converged, from its metrics; empty if it has.

    The rule, following Vehtari et al. (2021) and what CmdStan's
    ``diagnose`` and ArviZ report:

    - the worst rank-normalised R-hat is above :data:`RHAT_MAX` (1.01);
    - the worst bulk or tail ESS is below :data:`ESS_PER_CHAIN_MIN` (100)
      per chain;
    - there were divergent transitions (NUTS, HMC): the sampler could not
      follow the posterior somewhere, so the draws may be biased; the hint
      names the target acceptance ``delta`` where the sampler has one
      (``settings``; a Stan NUTS fit without them, which has ``max_depth``),
      else its step (``step_setting``). Proposals the program rejected (a
      ``reject``, a domain error: ``rejected_by_program``) are no divergences
      and no reason;
    - NUTS hit its largest tree depth: its trajectories were cut short;
    - the mean ``acceptance`` is below :data:`ACCEPTANCE_MIN`: the chains
      hardly moved (the reason names ``step_setting`` to lower, where known);
    - a stage of the run found what the draws cannot show (:func:`finding_warnings`:
      modes no draw visited, an improper posterior);
    - R-hat (of more than one chain) or ESS is not defined (NaN, null in
      ``metrics.json``): fewer than :data:`DRAWS_PER_CHAIN_MIN` kept draws
      per chain, or draws that never changed. A number that cannot be
      computed passes no check.

    A run of one chain has no R-hat (NaN); its ESS is still checked.

    Parameters
    ----------
    metrics : dict
        What :func:`convergence_metrics` returns (or ``metrics.json``):
        ``chains``, ``rhat_max``, ``ess_bulk_min``, ``ess_tail_min`` and,
        where known, ``divergences``, ``max_tree_depth_hits``, ``max_depth``,
        the per-parameter ``rhat``, ``ess_bulk``, ``ess_tail``, and of a
        sampling run its mean ``acceptance``, its ``settings`` and
        ``step_setting`` (the setting of its step, from the table of methods),
        and its stages' reports (``modes``, ``auto``, ``evidence``).
    """
    reasons = []
    chains = int(metrics.get("chains") or 1)
    acceptance = metrics.get("acceptance")
    if acceptance is not None and acceptance < ACCEPTANCE_MIN:
        step = metrics.get("step_setting")
        value = (metrics.get("settings") or {}).get(step)
        lower = f"lower {step}" + (f" (it is {value:g})" if isinstance(value, int | float) else "")
        reasons.append(
            f"acceptance {shown_beyond(acceptance, ACCEPTANCE_MIN, '.2f')} is below {ACCEPTANCE_MIN}: almost "
            "every proposal was rejected, so the chains hardly moved; the proposals reach too far: "
            + (lower if step else "make them smaller")
        )
    undefined = _undefined(metrics, chains)
    if undefined:
        reasons.append(undefined)
    rhat = metrics.get("rhat_max")
    if rhat is not None and not math.isnan(rhat) and rhat > RHAT_MAX:
        name = _worst_name(metrics.get("rhat") or {}, rhat)
        reasons.append(
            f"R-hat {shown_beyond(rhat, RHAT_MAX, '.3g')}{f' ({name})' if name else ''} is above {RHAT_MAX}: "
            "the chains disagree "
            "(not mixed, or stuck in different places); run longer or use a sampler that mixes better"
        )
    needed = ESS_PER_CHAIN_MIN * chains
    for kind in ("bulk", "tail"):
        ess = metrics.get(f"ess_{kind}_min")
        if ess is not None and not math.isnan(ess) and ess < needed:
            name = _worst_name(metrics.get(f"ess_{kind}") or {}, ess)
            shown = shown_beyond(ess, needed, ".0f")
            reasons.append(
                f"{kind} ESS {shown}{f' ({name})' if name else ''} is below {needed} "
                f"({ESS_PER_CHAIN_MIN} per chain): too few effective draws for reliable estimates"
            )
    draws = chains * int(metrics.get("draws_per_chain") or 0)
    divergences = int(metrics.get("divergences") or 0)
    if divergences:
        reasons.append(
            f"{divergences} of {draws} transitions diverged: the sampler could not follow the posterior "
            f"somewhere, so the draws may be biased; {_divergence_hint(metrics)}"
        )
    hits = int(metrics.get("max_tree_depth_hits") or 0)
    if hits:
        reasons.append(
            f"{hits} of {draws} transitions hit the largest tree depth {metrics.get('max_depth')}: "
            "NUTS's trajectories were cut short; raise max_depth or reparametrise"
        )
    return reasons + finding_warnings(metrics)


def _undefined(metrics: dict[str, Any], chains: int) -> str | None:
    """Why R-hat (of more than one chain) or ESS is not defined, where one is NaN (or null, read back
    from ``metrics.json``); None where each is a number or not in ``metrics`` at all."""
    checked = {"bulk ESS": "ess_bulk_min", "tail ESS": "ess_tail_min"}
    if chains > 1:
        checked = {"R-hat": "rhat_max", **checked}
    missing = [name for name, key in checked.items() if key in metrics and _not_a_number(metrics[key])]
    if not missing:
        return None
    draws = metrics.get("draws_per_chain")
    if draws is not None and draws < DRAWS_PER_CHAIN_MIN:
        return (
            f"fewer than {DRAWS_PER_CHAIN_MIN} kept draws per chain ({draws}): R-hat and ESS are not "
            "defined; run more draws (or thin less)"
        )
    return (
        f"{', '.join(missing)} not defined for any quantity: every quantity kept one value in every "
        "draw (the chains did not move), so the draws say nothing"
    )


def _not_a_number(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def finding_warnings(metrics: dict[str, Any]) -> list[str]:
    """Why what a stage of the run found contradicts convergence, from the stages' reports in ``metrics``.

    Chains that agree with one another can all be wrong alike, where a stage saw more than their draws
    show; R-hat and ESS cannot tell. The findings that say so:

    - ``modes["unvisited"]``: a cheap warm-up's runs from dispersed starts (Pathfinder's paths, L-BFGS
      from several starts), or ``auto``'s modes check of a Stan NUTS run at once (``modes["found_in"]``),
      ended at separated modes, and no draw of the run came near some of them
      (:func:`~stanaccel.diagnostics.modes.visited_modes_report`): its chains all settled in the others;
    - ``auto["modes"]["unresolved"]``: ``method = "auto"``'s pilots' chains disagreed about the modes,
      and the method it ran cannot move between them (no tempering method could run);
    - ``evidence["posterior_problem"]``: ``pt`` gave no evidence because its beta = 0 level did not
      settle, and the posterior's draws did not settle either: the posterior looks improper (swaps
      that mix drifting replicas keep R-hat low).

    What is no reason: proposals the program rejected (``rejected_by_program``), and an evidence not
    given while the posterior's draws settled (the prior alone is improper: ``evidence["not_given"]``,
    shown with the kernel statistics).
    """
    reasons = []
    modes = metrics.get("modes") or {}
    if modes.get("unvisited"):
        reasons.append(
            f"{modes.get('found_in', 'the warm-up')} found {modes['modes_found']} separated modes "
            f"({modes['found_by']} ended there), "
            f"and no draw came near {len(modes['unvisited'])} of them (unconstrained: "
            f"{'; '.join(modes['unvisited'])}): the chains all settled in the others, so their agreement "
            "says nothing; use pt (tempering), which moves between modes"
        )
    auto = metrics.get("auto") or {}
    auto_modes = auto.get("modes") or {}
    if auto_modes.get("unresolved"):
        reasons.append(
            f"auto's pilots' chains disagreed about the modes (chain means {auto_modes['gap']:.1f} "
            f"within-chain sds apart) and {auto.get('chosen', 'the method run')} cannot move between "
            "them (no tempering method could run): its draws may miss a mode; run pt"
        )
    posterior = (metrics.get("evidence") or {}).get("posterior_problem")
    if posterior:
        reasons.append(f"the posterior looks improper: {posterior}")
    return reasons


def _divergence_hint(metrics: dict[str, Any]) -> str:
    """What to change against divergences: the target acceptance of a sampler that has one, else its step."""
    settings = metrics.get("settings")
    if settings is None and "max_depth" in metrics:  # a Stan NUTS fit, which records no settings
        settings = {"delta": None}
    if "delta" in (settings or {}):
        return "raise the target acceptance (delta) or reparametrise"
    step = metrics.get("step_setting")
    return f"lower {step} or reparametrise" if step else "reparametrise"


def method_statistics(summaries: list) -> dict[str, list]:
    """Each chain's kernel statistics (:data:`METHOD_STATISTICS`, but the ladder), as plain lists.

    ``summaries`` holds each chain's kernel summary (a dict; None for a
    kernel without one). Returns ``{key: [value of chain 0, chain 1, ...]}``
    for every key some chain reports; empty for a method without any.
    """
    chains = [s for s in summaries if isinstance(s, dict)]
    return {
        key: [np.asarray(c[key]).tolist() for c in chains if c.get(key) is not None]
        for key in METHOD_STATISTICS
        if key != "betas" and any(c.get(key) is not None for c in chains)
    }


def method_warnings(statistics: dict[str, list]) -> list[str]:
    """Why a method's own statistics say it mixes poorly, from :func:`method_statistics`.

    The worst chain counts: a chain stuck while the others move is the failure
    to catch. Thresholds, each with its reason in its constant's docstring:

    - swap acceptance of a neighbouring pair of levels (PT, SPT) below
      :data:`SWAP_ACCEPTANCE_MIN` (0.1) in some chain, a level's own
      (inner) acceptance below :data:`INNER_ACCEPTANCE_MIN` (0.05), or no
      round trip between the hottest and coldest level in any chain;
    - trajectory acceptance (TT, STT, tt-approx) below
      :data:`TRAJECTORY_ACCEPTANCE_MIN` (0.1);
    - mark acceptance (DC) below :data:`MARK_ACCEPTANCE_MIN` (0.05);
    - independence acceptance (IMH) below :data:`PROPOSAL_ACCEPTANCE_MIN` (0.1).
    """
    reasons = []
    swaps = [np.atleast_1d(np.asarray(chain, dtype=float)) for chain in statistics.get("swap_acceptance", [])]
    if swaps and swaps[0].size:
        worst = np.min(np.stack(swaps), axis=0)
        low = [f"{k} and {k + 1}: {a:.2g}" for k, a in enumerate(worst) if a < SWAP_ACCEPTANCE_MIN]
        if low:
            reasons.append(
                f"swap acceptance below {SWAP_ACCEPTANCE_MIN} between levels {'; '.join(low)} (worst "
                "chain; level 0 is the posterior): the levels rarely exchange, so the posterior's chain "
                "gets little from the hotter ones; add levels between them"
            )
    inner = [
        np.atleast_1d(np.asarray(chain, dtype=float)) for chain in statistics.get("inner_acceptance", [])
    ]
    if inner and inner[0].size:
        worst = np.min(np.stack(inner), axis=0)
        low = [f"{k}: {a:.2g}" for k, a in enumerate(worst) if a < INNER_ACCEPTANCE_MIN]
        if low:
            reasons.append(
                f"inner acceptance below {INNER_ACCEPTANCE_MIN} at level {'; '.join(low)} (worst chain): "
                "the level's own moves are rarely accepted, so its replica hardly moves (and its swaps "
                "and round trips say little); retune the inner kernel's scale or step size"
            )
    trips = statistics.get("round_trips")
    if trips and sum(trips) == 0:
        reasons.append(
            "no round trip between the coldest and hottest level in any chain: the ladder does not "
            "carry states across; add levels or draws"
        )
    for key, name, limit, advice in (
        ("tt_acceptance", "trajectory acceptance", TRAJECTORY_ACCEPTANCE_MIN,
         "almost every tempered trajectory is rejected; use more levels (a finer ladder)"),
        ("move_acceptance", "mark acceptance", MARK_ACCEPTANCE_MIN,
         "moves proposed on the approximation are rarely accepted on the posterior, so the chain "
         "hardly moves; use a closer approximation or a smaller jump"),
        ("proposal_acceptance", "independence acceptance", PROPOSAL_ACCEPTANCE_MIN,
         "the t proposal fitted to the warm-up covers the posterior poorly (several modes, tails "
         "heavier than the t's, or too many dimensions), so the chain sticks; use nuts or hmc"),
    ):  # fmt: skip
        values = statistics.get(key)
        if values and min(values) < limit:
            chain = int(np.argmin(values))
            shown = shown_beyond(min(values), limit, ".2g")
            reasons.append(f"{name} {shown} in chain {chain} is below {limit}: {advice}")
    return reasons


def combined_statistics(statistics: dict[str, list]) -> list[tuple[str, Any]]:
    """Rows (label, value) of per-chain kernel statistics, combined over chains as
    :data:`METHOD_STATISTICS` says; a vector (one value per level or pair) stays a vector."""
    rows = []
    for key, (label, combine) in METHOD_STATISTICS.items():
        values = statistics.get(key)
        if not values:
            continue
        if combine == "first":
            value = values[0]
        elif combine == "sum":
            value = np.sum(values, axis=0)
        elif combine == "mcse":
            value = float(np.sqrt(np.sum(np.square(values))) / len(values))
        else:
            value = np.mean(np.asarray(values, dtype=float), axis=0)
            label += " (mean over chains)"
        rows.append((label, np.asarray(value).tolist()))
    return rows


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_shown(v) for v in value)
    return shown_number(value) if isinstance(value, float) else str(value)


def shown_beyond(value: float, limit: float, spec: str) -> str:
    """``value`` in the format ``spec``, with more digits where that would hide its side of ``limit``.

    An R-hat of 1.0134 shows as 1.013, not as 1.01 "above 1.01"; a bulk ESS
    of 399.6 as 399.6, not as 400 "below 400".
    """
    text = format(value, spec)
    digits = 2
    while (float(text) - limit) * (value - limit) <= 0 and digits < 17:
        digits += 1
        text = f"{value:.{digits}g}"
    return text


def shown_number(value: float) -> str:
    """A number for people: three significant digits, but two decimals from 10 to a million, so that a log
    evidence of -208.504 shows as -208.50, not -209 (its Monte Carlo error is a few hundredths)."""
    return f"{value:.2f}" if 10 <= abs(value) < 1e6 else f"{value:.3g}"


def warning_block(metrics: dict[str, Any], indent: str = "") -> str:
    """The lines that say plainly what is wrong with a run (empty if nothing is), for a console.

    A run that has not converged gets a loud header saying its summary and
    ESS per second are unreliable; one that converged but whose method mixes
    poorly gets a milder one. Each reason follows on its own line.
    """
    reasons = metrics.get("warnings")
    if reasons is None:
        reasons = judge(dict(metrics))["warnings"]
    if not reasons:
        return ""
    converged = metrics.get("converged", not convergence_warnings(metrics))
    rule = indent + "!" * 78
    header = (
        "WARNING: NOT CONVERGED. The summary and the ESS per second of this run are unreliable:"
        if not converged
        else "WARNING: the sampler's own statistics say it mixes poorly:"
    )
    return "\n".join([rule, indent + header, *(f"{indent}  - {r}" for r in reasons), rule])


def statistics_lines(metrics: dict[str, Any], indent: str = "") -> list[str]:
    """One console line per kernel statistic of ``metrics["method_statistics"]`` (none if there are none),
    and one saying why there is no evidence where ``metrics["evidence"]`` says it is not given."""
    rows = combined_statistics(metrics.get("method_statistics") or {}) + evidence_rows(metrics)
    if metrics.get("rejected_by_program"):
        rows.append((REJECTED_LABEL, metrics["rejected_by_program"]))
    return [f"{indent}{label}: {_shown(value)}" for label, value in rows]


def evidence_rows(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """A row (label, why) when ``metrics["evidence"]`` says the evidence is not given; else none (a given
    one is among the kernel statistics)."""
    evidence = metrics.get("evidence") or {}
    if not evidence.get("not_given"):
        return []
    return [("log evidence", f"not given: {evidence['not_given']}")]


def mcse_z_scores(
    idata: az.InferenceData,
    var_name: str,
    true_mean: np.ndarray,
    true_sd: np.ndarray,
    independent_floor: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Errors of posterior mean and sd estimates in units of their Monte Carlo standard error.

    ``|z|`` below about 3.5 is what a correct sampler gives with high probability.
    ``independent_floor``: divide by no less than the MCSE of as many independent
    draws (sd / sqrt(n) for a mean, sd / sqrt(2 n) for an sd). A run whose
    estimated ESS exceeds its draws (an antithetic kernel, or a noisy
    autocorrelation estimate at a few hundred draws) is otherwise held to a
    bound tighter than its error.
    """
    draws = idata.posterior[var_name]
    mean = draws.mean(dim=("chain", "draw")).values
    sd = draws.std(dim=("chain", "draw")).values
    columns, _ = scalar_draws(idata.posterior[[var_name]])
    mcse_mean = convergence.mcse_mean(columns).reshape(mean.shape)
    mcse_sd = convergence.mcse_sd(columns).reshape(mean.shape)
    if independent_floor:
        n = draws.sizes["chain"] * draws.sizes["draw"]
        mcse_mean = np.maximum(mcse_mean, true_sd / np.sqrt(n))
        mcse_sd = np.maximum(mcse_sd, true_sd / np.sqrt(2 * n))
    return (mean - true_mean) / mcse_mean, (sd - true_sd) / mcse_sd


def reference_z_scores(idata: az.InferenceData, reference: az.InferenceData) -> np.ndarray:
    """Differences of posterior means and sds from a reference run, in combined MCSE units.

    For checking a sampler against a long run of another (Stan NUTS) when the
    exact answer is unknown: z = (estimate - reference) / sqrt(mcse^2 +
    mcse_reference^2), for the mean and the sd of every scalar in the
    posterior group. Returns (2, n_scalars): means, then sds.
    """
    a, _ = scalar_draws(idata.posterior)
    b, _ = scalar_draws(reference.posterior[list(idata.posterior.data_vars)])
    mean_error = np.hypot(convergence.mcse_mean(a), convergence.mcse_mean(b))
    sd_error = np.hypot(convergence.mcse_sd(a), convergence.mcse_sd(b))
    means = (a.mean(axis=(0, 1)) - b.mean(axis=(0, 1))) / mean_error
    return np.array([means, (a.std(axis=(0, 1)) - b.std(axis=(0, 1))) / sd_error])


def rhat_trace(draws: np.ndarray, points: int = 12) -> list[tuple[int, float]]:
    """Median R-hat over coordinates against the number of draws.

    ``draws`` is (chains, draws, dim). For each prefix length k (on a grid up
    to all draws) the first half of the prefix is discarded as burn-in, as in
    the tempering-by-subsampling paper, and the rank-normalised R-hat of the
    rest is taken per coordinate.
    """
    n = draws.shape[1]
    lengths = sorted({int(k) for k in np.geomspace(min(20, n), n, points) if k >= 8})
    out = []
    for k in lengths:
        part = draws[:, k // 2 : k]
        out.append((k, float(np.median(convergence.rhat(part)))))
    return out


@numpy_path()
def autocorrelation(series: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelation of a scalar statistic at lags 0..max_lag, per chain (ArviZ's FFT estimate).

    ``series`` is (chains, draws); returns (chains, max_lag + 1). A constant
    chain has no defined autocorrelation; it is returned as 1 at every lag,
    since a stuck chain's draws are all the same.
    """
    series = np.asarray(series, dtype=float)
    out = np.ones((series.shape[0], max_lag + 1))
    moving = np.ptp(series, axis=1) > 0
    if np.any(moving):
        out[moving] = az.autocorr(series[moving], axis=-1)[:, : max_lag + 1]
    return out


def bulk_ess(series: np.ndarray) -> float:
    """The rank-normalised bulk ESS of a scalar statistic over chains, ``series`` (chains, draws; or
    (draws,), one chain)."""
    return float(convergence.ess_bulk(np.atleast_2d(np.asarray(series, dtype=float))[:, :, None])[0])


def worst_bulk_ess(draws: np.ndarray) -> float:
    """The smallest bulk ESS over the coordinates of ``draws`` (chains, draws, dim)."""
    values = convergence.ess_bulk(draws)
    return float(np.nanmin(values)) if not np.isnan(values).all() else float("nan")


def worst_ess(draws: np.ndarray) -> float:
    """The headline ESS of ``draws`` (chains, draws, dim): the smallest of bulk and tail ESS over coordinates.

    Bulk ESS alone flatters an antithetic sampler (HMC with a long
    trajectory, DC's inner HMC), whose bulk ESS can exceed the number of
    draws while its tail ESS, the quantiles' precision, does not; the worst
    of the two is what every speed figure of stanaccel divides.
    """
    values = ess_by_coordinate(draws)
    return float(np.min(values[~np.isnan(values)], initial=np.inf))  # a constant coordinate has none


def ess_by_coordinate(draws: np.ndarray) -> np.ndarray:
    """min(bulk, tail) ESS of each coordinate of ``draws`` (chains, draws, dim): which one is slowest."""
    return np.minimum(convergence.ess_bulk(draws), convergence.ess_tail(draws))


def split_rhat(draws: np.ndarray) -> float:
    """The largest split R-hat (Gelman et al., BDA3 11.4) over the coordinates of ``draws`` (chains,
    draws, dim); NaN for one chain or constant draws.

    Not rank-normalised: ``sampling.auto`` asks only whether a quick run's chains are stuck apart, and at a
    tenth of a millisecond it costs a run of a tenth of a second nothing (ArviZ's takes milliseconds).
    """
    chains, n, _ = draws.shape
    if chains < 2 or n < 4:
        return float("nan")
    half = n // 2
    split = np.concatenate([draws[:, :half], draws[:, n - half :]], axis=0)
    within = split.var(axis=1, ddof=1).mean(axis=0)
    between = half * split.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat = np.sqrt(((half - 1) / half * within + between / half) / within)
    return float(np.nanmax(rhat)) if np.isfinite(rhat).any() else float("nan")


def worst_rhat(draws: np.ndarray) -> float:
    """The largest rank-normalised split R-hat over the coordinates of ``draws`` (chains, draws, dim).

    NaN for one chain, or where no coordinate has a finite R-hat (constant draws).
    """
    values = convergence.rhat(draws)
    return float(np.nanmax(values)) if np.isfinite(values).any() else float("nan")


def mcse_mean(series: np.ndarray) -> float:
    """The Monte Carlo standard error of the mean of a scalar statistic, ``series`` (chains, draws; or
    (draws,), one chain)."""
    return float(convergence.mcse_mean(np.atleast_2d(np.asarray(series, dtype=float))[:, :, None])[0])
