"""The density study workflow at tiny sizes: rows, kinds, scores, tables and plots."""

import numpy as np
import pytest

from stanaccel.workflow import run_workflow

STUDY = """
[workflow]
name = "density"
seed = 3

[[steps]]
name = "bimodal"
action = "density_study"
target = "bimodal_1d"
sizes = [40, 80]
test_points = 300
grid = 120
gibbs = { iterations = 20, warmup = 10, density_every = 2 }
variational = { n_inducing = 10, quadrature = 60, iterations = 60 }
stan = { n_inducing = 8, n_normaliser = 100, chains = 1, warmup = 60, draws = 40, max_n = 40 }
"""


@pytest.mark.slow
def test_density_study_writes_its_tables(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    context = run_workflow(path, output=tmp_path / "out", progress=False)
    rows = context.results["bimodal"]["rows"]
    methods = [(r["method"], r["N"]) for r in rows]
    assert methods == [
        ("base Gaussian", 40),
        ("Gibbs (Alg. 1)", 40),
        ("variational (Alg. 2)", 40),
        ("Stan NUTS baseline", 40),
        ("base Gaussian", 80),
        ("Gibbs (Alg. 1)", 80),
        ("variational (Alg. 2)", 80),
    ]
    assert "approximate" in rows[2]["kind"] and "approximate" in rows[3]["kind"]
    for row in rows:
        assert np.isfinite(row["test_loglik"]) and 0 <= row["hellinger"] <= 1 and row["mass"] > 0.5
        assert row["test_loglik"] < row["truth_loglik"] + 0.2
    folder = tmp_path / "out" / "bimodal"
    for name in (
        "table.md",
        "table.json",
        "growth.md",
        "runtime.png",
        "density_N40.png",
        "densities_N80.npz",
    ):
        assert (folder / name).is_file()
    assert "Gibbs (Alg. 1) | 40, 80" in (folder / "growth.md").read_text()
    curves = np.load(folder / "densities_N80.npz")
    assert np.all(curves["gibbs_q05"] <= curves["gibbs_q95"])


def test_density_study_refuses_unknown_settings(tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(STUDY.replace('target = "bimodal_1d"', 'target = "bimodal_1d"\nsizez = [10]'))
    with pytest.raises(ValueError, match="sizez"):
        run_workflow(path, output=tmp_path / "out", progress=False)
