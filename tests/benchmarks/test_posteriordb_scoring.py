"""The scoring and the name mapping of ``benchmarks/posteriordb.py``, on fixed NumPy draws.

Needs neither posteriordb nor a compiled program: the script is imported by
its path (``benchmarks`` is not a package).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "posteriordb.py"


def _load():
    spec = importlib.util.spec_from_file_location("benchmark_posteriordb", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pdb = _load()


def ar1(phi: float, seed: int, chains: int = 4, draws: int = 1000) -> np.ndarray:
    """(chain, draw) draws of a stationary AR(1) series with coefficient ``phi``."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(size=(chains, draws))
    x = np.empty((chains, draws))
    x[:, 0] = noise[:, 0] / math.sqrt(1 - phi**2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x


def bulk_tail(x: np.ndarray) -> tuple[float, float]:
    return float(az.ess(x, method="bulk")), float(az.ess(x, method="tail"))


def test_score_is_tail_ess_when_antithetic():
    """AR(-0.5) is antithetic: its bulk ESS is far above the draws, its tail ESS far below the bulk."""
    draws = {"a": ar1(-0.5, seed=1), "b": ar1(0.0, seed=2)}
    bulk, tail = bulk_tail(draws["a"])
    assert tail < 0.5 * bulk
    expected = min(min(bulk_tail(x)) for x in draws.values())
    result = pdb.score(draws, charged_seconds=4.0, process_seconds=8.0)
    assert result["ess"] == pytest.approx(expected)
    assert result["ess"] == pytest.approx(tail)  # the antithetic parameter's tail ESS is the worst
    assert result["worst"] == "a"
    assert result["ess_per_charged_second"] == pytest.approx(expected / 4.0)
    assert result["ess_per_process_second"] == pytest.approx(expected / 8.0)
    assert result["ess"] < result["ess_bulk_min"]  # bulk ESS alone would flatter it


def test_score_is_bulk_ess_when_bulk_is_lower():
    """AR(0.9) mixes slowly: its bulk ESS is below its tail ESS, and the score is the bulk."""
    draws = {"slow": ar1(0.9, seed=3), "fast": ar1(0.0, seed=4)}
    bulk, tail = bulk_tail(draws["slow"])
    assert bulk < 0.7 * tail
    result = pdb.score(draws, charged_seconds=2.0, process_seconds=3.0)
    assert result["ess"] == pytest.approx(bulk)
    assert result["worst"] == "slow"
    assert result["ess_bulk_min"] == pytest.approx(bulk)


def test_score_takes_inference_data_and_named_parameters():
    """InferenceData scores as its posterior; ``names`` restricts the score to those scalars."""
    theta = np.stack([ar1(-0.5, seed=5), ar1(0.9, seed=6)], axis=-1)  # (chain, draw, 2)
    idata = az.from_dict(posterior={"theta": theta})
    first = pdb.score(idata, 1.0, 1.0, names=["theta[1]"])
    assert first["ess"] == pytest.approx(min(bulk_tail(theta[:, :, 0])))
    both = pdb.score(idata, 1.0, 1.0)
    assert both["ess"] == pytest.approx(min(min(bulk_tail(theta[:, :, i])) for i in range(2)))
    assert both["worst"] == "theta[2]"
    assert pdb.score(idata, 1.0, 1.0, names=["theta[1]", "nope[3]"])["missing"] == ["nope[3]"]


def test_name_mapping_of_a_matrix_parameter():
    """posteriordb's "b[2,1]" (1-based: row 2, column 1) is our b[..., 1, 0]."""
    rows, cols = 3, 2
    values = np.array(
        [[10.0 * (i + 1) + (j + 1) for j in range(cols)] for i in range(rows)]
    )  # b[i,j] = 10i + j
    b = np.broadcast_to(values, (2, 5, rows, cols)).copy()
    draws = {"b": b, "mu": np.zeros((2, 5))}
    assert pdb.parse_name("b[2,1]") == ("b", (1, 0))
    assert pdb.parse_name("mu") == ("mu", ())
    assert pdb.stan_name("b", (1, 0)) == "b[2,1]"
    np.testing.assert_array_equal(pdb.column(draws, "b[2,1]"), 21.0)
    np.testing.assert_array_equal(pdb.column(draws, "b[1,2]"), 12.0)
    np.testing.assert_array_equal(pdb.column(draws, "mu"), 0.0)
    columns = pdb.stan_columns(draws)
    assert list(columns)[:3] == ["b[1,1]", "b[1,2]", "b[2,1]"]
    assert all(np.all(x == 10 * int(n[2]) + int(n[4])) for n, x in columns.items() if n.startswith("b"))
    for name in ("b[4,1]", "b[0,1]", "b[2]", "c[1]"):
        with pytest.raises(KeyError):
            pdb.column(draws, name)


def test_check_against_reference_draws():
    """Draws of the reference's own distribution pass; a shifted mean and a doubled sd fail."""
    rng = np.random.default_rng(7)
    reference = {"b[1,1]": rng.normal(size=(10, 1000)), "s": rng.normal(2.0, 0.5, size=(10, 1000))}
    same = {"b": rng.normal(size=(4, 1000, 1, 1)), "s": rng.normal(2.0, 0.5, size=(4, 1000))}
    result = pdb.check(same, reference)
    assert result["means_pass"] and result["sd_pass"], result
    assert result["limit"] == pytest.approx(2.807, abs=1e-3)  # norm.isf(0.01 / (2 * 2))
    shifted = {"b": same["b"] + 0.2, "s": same["s"] * 2 - 2.0}  # s: mean 2, sd 1 instead of 0.5
    result = pdb.check(shifted, reference)
    assert not result["means_pass"] and result["worst_z_name"] == "b[1,1]"
    assert not result["sd_pass"] and list(result["sd_failures"]) == ["s"]


def test_reasons_in_a_line():
    """A skipped run's reason is its error's first line (stanc's with why); auto's reason in a few words."""
    stanc = (
        "stanaccel compile: error: Syntax error in 'bad.stan', line 1, column 20 to column 21, "
        "parsing error:\n"
        "   ---------\n     1:  parameters { real x[3]; }\n   ---------\n\n"
        '";" expected after variable declaration.\n'
        "It looks like you are trying to use the old array syntax.\n"
    )
    assert pdb.error_reason(stanc) == (
        "Syntax error in 'bad.stan', line 1, column 20 to column 21, parsing error: "
        '";" expected after variable declaration.'
    )
    assert pdb.error_reason("Traceback (most recent call last):\n  File x\nRuntimeError: boom\n") == (
        "RuntimeError: boom"
    )
    reason = (
        "auto: chose imh (projected 929 ESS/s; dc 346, nuts 591): the highest projected ESS/s with "
        "warm-up and set-up charged, among pilots agreeing with nuts's"
    )
    assert pdb.short_reason(reason) == "proj. 929 vs dc 346, nuts 591"
    assert pdb.short_reason("auto: no pilot gave a usable estimate, so nuts runs") == "no usable pilot"


def _run(seed: int, charged: float, process: float, ess: float = 100.0, failure=None, status: str = "ok"):
    score = {
        "ess": ess,
        "ess_per_charged_second": ess / charged,
        "ess_per_process_second": ess / process,
        "ess_per_1000_gradients": None,
    }
    run = {"seed": seed, "status": status, "charged_seconds": charged, "process_seconds": process}
    return {**run, "score": score, "failure": failure} if status == "ok" else {**run, "reason": "timed out"}


def test_seeds_are_scored_by_their_medians_and_a_failed_seed_fails_the_method():
    method = pdb.over_seeds([_run(1, 0.10, 2.0), _run(2, 0.05, 1.0), _run(3, 0.20, 4.0)])
    assert method["status"] == "ok"
    assert method["ess_per_charged_second"] == pytest.approx(1000.0)  # 100 / 0.1, the middle one
    assert method["ess_per_process_second"] == pytest.approx(50.0)
    assert method["ess_per_1000_gradients"] is None  # not reported: "-" in the table
    failed = pdb.over_seeds([_run(1, 1.0, 2.0), _run(2, 1.0, 2.0, failure="R-hat 1.020 (mu)")])
    assert failed["status"] == "failed" and failed["reason"] == "seed 2: R-hat 1.020 (mu)"
    skipped = pdb.over_seeds([_run(1, 1.0, 2.0, status="skipped")])
    assert skipped["status"] == "skipped" and skipped["reason"] == "seed 1: timed out"


def test_ratio_is_to_the_best_converged_peer():
    def method(per_second: float, status: str = "ok") -> dict:
        return {
            "status": status,
            "ess_per_charged_second": per_second,
            "ess_per_process_second": per_second / 2,
        }

    methods = {
        "nuts": method(100.0),
        "nuts-dense": method(150.0),
        "nutpie": method(900.0, status="failed"),  # faster, but not converged: no baseline
        "auto": method(300.0),
    }
    ratios = pdb.ratios(methods)
    assert ratios["best_peer_charged"] == "nuts-dense"
    assert ratios["ratio_charged"] == pytest.approx(2.0)
    assert ratios["ratio_process"] == pytest.approx(2.0)
    assert ratios["ratio_nuts"] == pytest.approx(3.0)
    assert "ratio_charged" not in pdb.ratios({**methods, "auto": method(300.0, status="failed")})


def test_failure_names_the_rhat_then_the_check():
    check = {"missing": [], "means_pass": True, "sd_pass": True, "worst_z_name": "a", "worst_z": 1.0,
             "limit": 3.0, "sd_failures": {}}  # fmt: skip
    run = {"score": {"rhat_max": 1.005, "rhat_worst": "a"}, "check": check}
    assert pdb.failure(run) is None
    assert pdb.failure({**run, "score": {"rhat_max": 1.02, "rhat_worst": "b"}}) == "R-hat 1.020 (b)"
    bad_mean = {**check, "means_pass": False, "worst_z": 4.2}
    assert pdb.failure({**run, "check": bad_mean}) == "mean of a off, |z| 4.20 > 3.00"
