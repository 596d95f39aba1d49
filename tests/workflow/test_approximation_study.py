"""The approximation study workflow on a tiny GP posterior: rows, tables, cost accounting."""

import pytest

from stanaccel.diagnostics.report import write_report
from stanaccel.workflow import run_workflow
from stanaccel.workflow.studies.approximation import expand

STUDY = """
[workflow]
name = "approx"
seed = 3

[[steps]]
name = "gp"
action = "approximation_study"
data = { N = 40, D = 2, ell = [1.5, 2.5], sigma_f = 1.0, sigma_n = 0.5 }
chains = 2
draws = 150
nuts = { warmup = 150, draws = 200 }
tune = { kind = "fitc", m = 10 }
tune_warmup = 150
tune_draws = 100

[[steps.samplers]]
method = "mh"

[[steps.samplers]]
method = "dc"
approx = { kind = "fitc", m = 10 }
inner = "mh"
jump = 4
sweep = { moves = [1, 3] }

[[steps.samplers]]
method = "tt-approx"
ladder = [{ kind = "fitc", m = 10 }, { kind = "subset", m = 10 }]
inner_steps = 2
"""


@pytest.mark.slow
def test_approximation_study_writes_its_tables(tmp_path, gp_program):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    context = run_workflow(path, output=tmp_path / "out", progress=False)
    result = context.results["gp"]
    rows = result["rows"]
    assert [r["sampler"] for r in rows] == ["Stan NUTS on pi", "MH on pi", "DC (MH)", "DC (MH)", "TT (MH)"]
    mh, dc1, dc3, tt = rows[1:]
    assert mh["approx_per_iteration"] == 0 and mh["exact_per_iteration"] == pytest.approx(1.0, abs=0.01)
    assert dc1["exact_per_iteration"] == pytest.approx(1.0, abs=0.01) and dc1["cache_hit_fraction"] == 0
    assert dc1["approx_per_iteration"] == pytest.approx(4.0, abs=0.01)  # s = 4 MH steps on pi*
    assert dc3["exact_per_iteration"] < 3 and dc3["cache_hit_fraction"] > 0  # r = 3: revisits are free
    assert tt["exact_per_iteration"] == pytest.approx(1.0, abs=0.01)  # pi at the proposal only
    assert all(r["ess_bulk_min"] > 0 and r["vs_nuts"] > 0 for r in rows)
    assert {r["approximation"] for r in result["approximations"]} == {"fitc m=10", "subset m=10"}
    for name in ("table.md", "table.csv", "table.json", "approximations.md", "ess_per_second.png"):
        assert (tmp_path / "out" / "gp" / name).is_file()
    unconverged = [r["settings"] for r in rows if not r["converged"]]  # R-hat, ESS: the report shades them
    html = write_report(tmp_path / "out").read_text()
    assert html.count('<tr class="unconverged">') >= 2 * len(unconverged)  # the study table and the summary's
    assert ("have not converged" in html) == bool(unconverged)


def test_sweeps_expand_and_unknown_methods_are_refused():
    specs = expand([{"method": "dc", "sweep": {"moves": [1, 2], "jump": [3, 4, 5]}}])
    assert len(specs) == 6 and {(s["moves"], s["jump"]) for s in specs} == {
        (1, 3),
        (2, 5),
        (2, 4),
        (1, 4),
        (1, 5),
        (2, 3),
    }
    with pytest.raises(ValueError, match="unknown sampler method"):
        expand([{"method": "nuts-ish"}])


HEADER, MH, DC, _ = STUDY.split("[[steps.samplers]]")
CHEAP = "[[steps.samplers]]".join(  # the study's MH and DC, tuned by the Laplace warm-up and by NUTS's
    [
        HEADER.replace("tune_draws = 100\n", 'tune_draws = 100\nwarmup = "laplace"\n'),
        MH,
        DC.replace("sweep = { moves = [1, 3] }", 'sweep = { warmup = ["nuts", "laplace"] }'),
    ]
)


@pytest.mark.slow
def test_a_study_step_tunes_its_samplers_by_the_laplace_warm_up(tmp_path, gp_program, capsys):
    path = tmp_path / "study.toml"
    path.write_text(CHEAP)
    rows = run_workflow(path, output=tmp_path / "out", progress=False).results["gp"]["rows"]
    out = capsys.readouterr().out
    nuts, mh, dc_nuts, dc_laplace = rows
    assert [r["warmup"] for r in rows] == ["nuts", "laplace", "nuts", "laplace"]
    assert mh["warmup_report"]["used"] == "laplace" and mh["warmup_report"]["pareto_k"] <= 0.7
    assert "laplace warm-up" in mh["settings"] and "warm-up" not in dc_nuts["settings"]
    # One Laplace fit (on the tuning approximation) and one NUTS pilot, each charged to its samplers.
    assert out.count("Laplace approximation of") == 1 and out.count("tuning: Stan NUTS") == 1
    assert mh["warmup_seconds"] > 0 and dc_laplace["warmup_seconds"] > 0
    assert all(r["seconds"] == pytest.approx(r["warmup_seconds"] + r["sampling_seconds"]) for r in rows)
