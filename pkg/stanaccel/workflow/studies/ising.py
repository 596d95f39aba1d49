"""Bayesian-optimised intracluster moves on constrained Ising models (the ``ising_study`` action).

The experiment of "Bayesian optimization for adaptive MCMC" (Mahendran,
Wang, Hamze and de Freitas): a Boltzmann machine restricted to the states at
Hamming distance ``distance`` (default: half the sites) from the all-ones
state, sampled by the intracluster-move (IM) sampler, whose walk length k
and energy bias gamma are hard to set by hand. One step:

1. builds the ``model`` (``kind`` "ferromagnet_2d", "spin_glass_3d",
   "digits_rbm" or "random_rbm", with that constructor's options;
   :mod:`stanaccel.ising`) and one burnt-in constrained state (``burn_in``
   sweeps of IM with uniform walk lengths from half the sites flipped at
   random) that every tuning trial and every chain starts from (at a
   critical point, a random start takes thousands of sweeps to forget, and
   a chain still drifting would score its drift, not its mixing);
2. tunes (k, gamma) over ``search`` (``walk_length`` 1..``k_max``; ``gamma``
   in units of beta) by Bayesian optimisation and by random search, each
   with ``budget`` trials of ``trial_sweeps`` sweeps scored by the paper's
   objective: 1 minus the mean absolute autocorrelation of the energy over
   lags 1..``max_lag``;
3. runs ``chains`` chains of ``sweeps`` sweeps (after ``burn_in``) per
   sampler: IM with uniform walk lengths (k uniform on 1..k_max each move,
   gamma 0), the expert's setting (``expert``), the best setting of random
   search (the largest objective seen), the best setting of BO (the largest
   posterior mean among its trials), the BO policy at each of
   ``temperatures`` (default the authors' 10: a fixed mixture of IM kernels
   over ``policy_size`` settings drawn with probability proportional to
   exp(100 mu / T), :class:`stanaccel.tuning.RandomisedPolicy`), Kawasaki
   spin exchange, and, on the 2-D ferromagnet, Swendsen-Wang on the
   unconstrained model as a speed anchor (a different distribution: its
   energy is not comparable).

It writes ``table.{md,csv,json}`` (per sampler: the objective on the
sampling chains, the energy's bulk ESS, ESS per second of sampling and with
the tuning charged, the mean energy per site with its MCSE, acceptance, the
settings or the policy's heaviest settings), ``trials.{md,csv,json}`` (every
tuning trial of both tuners) and ``policy.{md,csv,json}``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stanaccel import ising
from stanaccel.diagnostics.metrics import bulk_ess, mcse_mean
from stanaccel.seeds import spawn_seed
from stanaccel.tuning import (
    Categorical,
    Integer,
    RandomisedPolicy,
    Space,
    autocorrelation_objective,
    bayesian_optimisation,
    random_search,
)
from stanaccel.workflow.tables import write_table
from stanaccel.workflow.validation import BOOLEAN, INTEGER, NUMBER, Kind, ListOf, Table, keys_of, one_of

MODELS = {
    "ferromagnet_2d": ising.ferromagnet_2d,
    "spin_glass_3d": ising.spin_glass_3d,
    "digits_rbm": ising.digits_rbm,
    "random_rbm": ising.random_rbm,
}
EXPERT = {"ferromagnet_2d": 90, "spin_glass_3d": [1, 25], "digits_rbm": [1, 20], "random_rbm": [1, 20]}
"""The authors' expert walk lengths: one k, or [low, high] for k uniform on low..high each move."""
GAMMAS = tuple(round(0.2 * i, 1) for i in range(11))
"""The energy biases searched, in units of beta (the authors' grid 0, 0.2, ..., 2.0)."""

COLUMNS = [
    "sampler",
    "settings",
    "objective",
    "ess",
    "seconds",
    "ess_per_second",
    "tuning_seconds",
    "ess_per_second_charged",
    "energy_per_site",
    "energy_mcse",
    "acceptance",
]
TRIAL_COLUMNS = ["tuner", "trial", "walk_length", "gamma", "objective", "seconds"]
POLICY_COLUMNS = ["temperature", "walk_length", "gamma", "weight", "predicted"]

WALK_LENGTH = Kind(
    "a walk length or [low, high]",
    lambda v: (
        isinstance(v, int) or (isinstance(v, list) and len(v) == 2 and all(isinstance(k, int) for k in v))
    ),
)


def _model_schema(table: dict[str, Any]) -> dict[str, Any]:
    kind = table.get("kind")
    return {"kind": one_of(*MODELS), **(keys_of(MODELS[kind]) if kind in MODELS else {})}


SCHEMA = Table(
    {
        "model": Table(_model_schema, required=("kind",)),
        "distance": INTEGER,
        "chains": INTEGER,
        "sweeps": INTEGER,
        "burn_in": INTEGER,
        "max_lag": INTEGER,
        "k_max": INTEGER,
        "expert": Table({"walk_length": WALK_LENGTH, "gamma": NUMBER}),
        "budget": INTEGER,
        "trial_sweeps": INTEGER,
        "temperatures": ListOf(NUMBER),
        "policy_size": INTEGER,
        "swendsen_wang": BOOLEAN,
    }
)


def build_model(spec: dict[str, Any]) -> ising.IsingModel:
    """The model a step's ``model`` table names (its other keys are the constructor's options)."""
    options = {k: v for k, v in spec.items() if k != "kind"}
    return MODELS[spec["kind"]](**options)


def search_space(k_max: int) -> Space:
    """Walk lengths 1..k_max and the energy biases of :data:`GAMMAS` (in units of beta)."""
    return Space([Integer("walk_length", 1, k_max), Categorical("gamma", GAMMAS)])


def ising_study_step(step: dict[str, Any], context, seed: int) -> dict[str, Any]:
    """Run the study (see the module docstring) and write its tables."""
    folder = context.output / step["name"]
    folder.mkdir(parents=True, exist_ok=True)
    model = build_model(step["model"])
    distance = int(step.get("distance", model.n // 2))
    chains, sweeps = int(step.get("chains", 4)), int(step.get("sweeps", 2000))
    burn_in, max_lag = int(step.get("burn_in", 200)), int(step.get("max_lag", 100))
    k_max = int(step.get("k_max", 50))
    expert = step.get("expert", {})
    print(f"  {model.name}: {model.n} sites, beta {model.beta:.4g}, distance {distance}", flush=True)

    def im(walk_length, gamma: float) -> ising.IntraclusterMoves:
        return ising.IntraclusterMoves(model, walk_length=walk_length, bias=gamma * model.beta)

    uniform = list(range(1, k_max + 1))
    rng = np.random.default_rng(spawn_seed(seed, 0))
    start = ising.constrained_start(model, distance, rng)
    burnt = ising.run_chain(im(uniform, 0.0), start, burn_in, rng).final
    trial_sweeps = int(step.get("trial_sweeps", 300))

    def objective(settings: dict[str, Any], trial_rng: np.random.Generator) -> tuple[float, dict]:
        kernel = im(int(settings["walk_length"]), float(settings["gamma"]))
        run = ising.run_chain(kernel, burnt, trial_sweeps, trial_rng)
        value = autocorrelation_objective(run.energy, max_lag=max_lag)
        return value, {"acceptance": run.acceptance, "sweeps_per_second": trial_sweeps / run.seconds}

    space, budget = search_space(k_max), int(step.get("budget", 30))
    print(
        f"  tuning (k, gamma) by Bayesian optimisation: {budget} trials of {trial_sweeps} sweeps", flush=True
    )
    bo = bayesian_optimisation(objective, space, budget=budget, seed=spawn_seed(seed, 1))
    print(f"  best {_describe(bo.best)}: objective {bo.best_value:.3f} ({bo.seconds:.0f} s)", flush=True)
    print(f"  ... and by random search: {budget} trials", flush=True)
    rs = random_search(objective, space, budget=budget, seed=spawn_seed(seed, 2))
    print(f"  best {_describe(rs.best)}: objective {rs.best_value:.3f} ({rs.seconds:.0f} s)", flush=True)
    temperatures = [float(t) for t in step.get("temperatures", [10.0])]
    policies = {
        t: RandomisedPolicy.from_result(
            bo, temperature=t, size=int(step.get("policy_size", 1000)), seed=spawn_seed(seed, 3, i)
        )
        for i, t in enumerate(temperatures)
    }

    expert_k = expert.get("walk_length", EXPERT[step["model"]["kind"]])
    if isinstance(expert_k, list):
        expert_k = list(range(expert_k[0], expert_k[1] + 1))
    expert_gamma = float(expert.get("gamma", 0.0))
    samplers: list[tuple[str, str, Any, float]] = [
        ("IM, uniform walk lengths", f"k ~ U{{1..{k_max}}}, gamma 0", im(uniform, 0.0), 0.0),
        ("IM, expert", _describe_k(expert_k, expert_gamma), im(expert_k, expert_gamma), 0.0),
        ("IM, random search", _describe(rs.best), im(int(rs.best["walk_length"]), float(rs.best["gamma"])),
         rs.seconds),
        ("IM, BO best", _describe(bo.best), im(int(bo.best["walk_length"]), float(bo.best["gamma"])),
         bo.seconds),
        *[(f"IM, BO policy (T={t:g})", _policy_brief(policy), policy.mixture(
            lambda s: im(int(s["walk_length"]), float(s["gamma"]))), bo.seconds)
          for t, policy in policies.items()],
        ("Kawasaki", "", ising.KawasakiExchange(model), 0.0),
    ]  # fmt: skip
    if step.get("swendsen_wang", step["model"]["kind"] == "ferromagnet_2d"):
        samplers.append(
            ("Swendsen-Wang (unconstrained)", "not at fixed distance", ising.SwendsenWang(model), 0.0)
        )

    rows = []
    for k, (name, settings, kernel, tuning_seconds) in enumerate(samplers):
        row = _run(model, kernel, burnt, chains, burn_in, sweeps, max_lag, spawn_seed(seed, 4, k))
        row.update(sampler=name, settings=settings, tuning_seconds=tuning_seconds)
        row["ess_per_second_charged"] = row["ess"] / (row["seconds"] + tuning_seconds)
        print(f"  {name}: ESS/s {row['ess_per_second']:.3g}, objective {row['objective']:.3f}", flush=True)
        rows.append(row)

    trials = [
        {"tuner": tuner, "trial": i, **t.settings, "objective": t.value, "seconds": t.seconds}
        for tuner, result in (("bayesian optimisation", bo), ("random search", rs))
        for i, t in enumerate(result.trials)
    ]
    write_table(folder, "trials", trials, TRIAL_COLUMNS)
    policy_rows = [{"temperature": t, **row} for t, policy in policies.items() for row in policy.table()]
    write_table(folder, "policy", policy_rows, POLICY_COLUMNS)
    table = write_table(folder, "table", rows, COLUMNS)
    print(table)
    return {"rows": rows, "trials": trials, "policy": policy_rows, "model": model.name}


def _run(model, kernel, start, chains, burn_in, sweeps, max_lag, seed) -> dict[str, Any]:
    """``chains`` chains of ``kernel`` from ``start``, each burnt in on its own; the energy's figures."""
    energies, seconds, acceptance = [], 0.0, []
    for chain in range(chains):
        rng = np.random.default_rng(spawn_seed(seed, chain))
        burnt = ising.run_chain(kernel, start, burn_in, rng, model=model).final
        run = ising.run_chain(kernel, burnt, sweeps, rng, model=model)
        seconds += run.seconds
        energies.append(run.energy)
        acceptance.append(run.acceptance)
    energy = np.array(energies)
    ess = bulk_ess(energy)
    return {
        "objective": autocorrelation_objective(energy, max_lag=max_lag),
        "ess": ess,
        "seconds": seconds,
        "ess_per_second": ess / seconds,
        "energy_per_site": float(energy.mean() / model.n),
        "energy_mcse": float(mcse_mean(energy) / model.n),
        "acceptance": float(np.mean(acceptance)),
    }


def _describe(settings: dict[str, Any]) -> str:
    return f"k {int(settings['walk_length'])}, gamma {float(settings['gamma']):.1f} beta"


def _describe_k(walk_length, gamma: float) -> str:
    k = f"k ~ U{{{min(walk_length)}..{max(walk_length)}}}" if np.ndim(walk_length) else f"k {walk_length}"
    return f"{k}, gamma {gamma:.1f} beta"


def _policy_brief(policy: RandomisedPolicy, top: int = 3) -> str:
    """The policy's heaviest settings with their weights."""
    rows = policy.table()[:top]
    return (
        "; ".join(f"{_describe(r)} ({r['weight']:.2f})" for r in rows)
        + f" ... ({len(policy.settings)} settings)"
    )
