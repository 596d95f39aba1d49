"""The PDE study workflow on a tiny mesh: the rows, the surrogates' table, the reference and the costs."""

import numpy as np
import pytest

from stanaccel.workflow import run_workflow

STUDY = """
[workflow]
name = "pde"
seed = 4

[[steps]]
name = "p1"
action = "pde_study"
posterior = { n = 10, degree = 1, regime = "observations" }
chains = 2
draws = 100
warmup = 100
reference = { draws = 200, thin = 2 }

[[steps.samplers]]
method = "pcn"
thin = 2

[[steps.samplers]]
method = "h-pcn"

[[steps.samplers]]
method = "dc"
approx = { kind = "linearized" }
inner = "h-pcn"
jump = 4

[[steps.samplers]]
method = "tt-approx"
ladder = [{ kind = "coarse", m = 5 }, { kind = "linearized", scale = false }]
inner = "pcn"
inner_steps = 2
"""


@pytest.mark.slow
def test_pde_study_writes_its_tables(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    context = run_workflow(path, output=tmp_path / "out", progress=False)
    result = context.results["p1"]
    rows = result["rows"]
    assert [r["sampler"] for r in rows] == [
        "reference: h-pCN",
        "pCN",
        "h-pCN",
        "DC (h-pCN)",
        "TT over approximations (pCN)",
    ]
    assert rows[1]["vs_pcn"] == 1.0 and all(r["ess_bulk_min"] > 0 and r["exact"] for r in rows)
    assert rows[1]["evaluations"] >= 2 * 100 * 2  # thin = 2: every step evaluated, every other kept
    assert all(np.isfinite(r["z_max"]) and r["log_lik_mean"] < 0 for r in rows)
    assert rows[0]["z_max"] == 0 and all(isinstance(r["passes"], bool) for r in rows)  # reference: itself
    surrogates = {r["approximation"]: r for r in result["surrogates"]}
    assert set(surrogates) == {"linearized", "coarse m=5", "linearized (no error model)"}
    assert np.isfinite(surrogates["linearized"]["log_ratio_sd_no_error_model"])
    assert all(r["relative_cost"] > 0 for r in surrogates.values())
    for name in ("table.md", "table.json", "surrogates.md", "ess_per_second.png"):
        assert (tmp_path / "out" / "p1" / name).is_file()


def test_a_stan_only_method_in_a_pde_study_is_refused_before_sampling(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY.replace('method = "h-pcn"\n', 'method = "nuts"\n', 1))
    with pytest.raises(ValueError, match="nuts"):
        run_workflow(path, output=tmp_path / "out", progress=False)
