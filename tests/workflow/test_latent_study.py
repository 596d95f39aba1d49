"""The latent study workflow on a tiny logistic regression: rows, labels, tables, the saved autoencoder."""

import pytest

from stanaccel.latent import Autoencoder
from stanaccel.workflow import run_workflow

STUDY = """
[workflow]
name = "latent"
seed = 2

[[steps]]
name = "logit"
action = "latent_study"
data = { generator = "logistic", N = 200, K = 6, collinear = 2, N_test = 50 }
chains = 2
draws = 100
nuts = { warmup = 150, draws = 100 }
reference = { warmup = 150, draws = 300 }
pilot = { warmup = 100 }
autoencoder = { latent_dim = 2, epochs = 40, patience = 5 }

[[steps.samplers]]
method = "ae-hmc"
exact = false
latent_n_steps = 4
tune = 20

[[steps.samplers]]
method = "ae-hmc"
exact = false
latent_n_steps = 4
route = "stan"
tune = 20

[[steps.samplers]]
method = "ae-hmc"
latent_n_steps = 4
exact = true
tune = 20

[[steps.samplers]]
method = "ae-pcn"
exact = true
tune = 20

[[steps.samplers]]
method = "latent-nuts"
warmup = 100

[[steps.samplers]]
method = "hmc"
n_steps = 3
"""


@pytest.mark.slow
def test_latent_study_writes_its_tables(tmp_path, logistic_program, logistic_latent_program):
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    context = run_workflow(path, output=tmp_path / "out", progress=False)
    rows = context.results["logit"]["rows"]
    approximate, exact = "AE-HMC (approximate)", "AE-HMC (exact)"
    latent_nuts = "NUTS in the latent space (approximate)"
    expected = [
        "Stan NUTS",
        approximate,
        approximate,
        exact,
        "AE-pCN (exact)",
        latent_nuts,
        "HMC (full space)",
    ]
    assert [r["sampler"] for r in rows] == expected
    assert [r["exact"] for r in rows] == [True, False, False, True, True, False, True]
    assert "latent Stan program" in rows[2]["settings"] and "full-space HMC" in rows[3]["settings"]
    for row in rows:
        assert row["ess_bulk_min"] > 0 and 0 <= row["test_accuracy"] <= 1 and row["sd_ratio_min"] > 0
    assert rows[1]["evaluations_per_iteration"] > 4  # L = 4 gradients plus the start
    folder = tmp_path / "out" / "logit"
    for name in ("table.md", "table.json", "routes.md", "reconstruction.json", "ess_per_second.png"):
        assert (folder / name).is_file()
    assert Autoencoder.load(folder / "autoencoder").latent_dim == 2
