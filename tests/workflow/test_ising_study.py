"""The Ising study workflow on small models: every row, the tuners' trials, the policy, and bad input."""

import numpy as np
import pytest

from stanaccel.workflow import load_workflow, run_workflow

STUDY = """
[workflow]
name = "ising"
seed = 3

[[steps]]
name = "grid"
action = "ising_study"
model = {{ kind = "ferromagnet_2d", side = 8, beta = 0.4 }}
chains = 2
sweeps = 300
burn_in = 50
max_lag = 20
k_max = 20
budget = {budget}
trial_sweeps = 100
policy_size = 200
temperatures = [10, 1]
expert = {{ walk_length = 10 }}
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ising")
    (folder / "study.toml").write_text(STUDY.format(budget=6))
    return folder, run_workflow(folder / "study.toml", output=folder / "out", progress=False)


def test_every_sampler_has_a_row_and_the_constrained_ones_agree(study):
    folder, context = study
    result = context.results["grid"]
    rows = {r["sampler"]: r for r in result["rows"]}
    constrained = [
        "IM, uniform walk lengths",
        "IM, expert",
        "IM, random search",
        "IM, BO best",
        "IM, BO policy (T=10)",
        "IM, BO policy (T=1)",
        "Kawasaki",
    ]
    assert set(constrained) | {"Swendsen-Wang (unconstrained)"} == set(rows)
    for name in constrained:
        row = rows[name]
        assert 0 <= row["objective"] <= 1 and row["ess"] > 0 and row["ess_per_second"] > 0
    # the samplers at fixed distance share one distribution: their mean energies agree within MCSE
    means = np.array([rows[n]["energy_per_site"] for n in constrained])
    mcse = np.array([rows[n]["energy_mcse"] for n in constrained])
    assert np.all(np.abs(means - means.mean()) < 5 * np.sqrt(mcse**2 + mcse.mean() ** 2))
    policy = rows["IM, BO policy (T=10)"]
    # charged: the tuning's seconds added to the sampler's own
    charged = policy["ess"] / (policy["seconds"] + policy["tuning_seconds"])
    assert policy["tuning_seconds"] > 0 and policy["ess_per_second_charged"] == pytest.approx(charged)
    assert len(result["trials"]) == 12  # 6 of each tuner
    for t in (10, 1):
        assert abs(sum(r["weight"] for r in result["policy"] if r["temperature"] == t) - 1) < 1e-9
    for name in ("table.md", "trials.csv", "policy.json"):
        assert (folder / "out" / "grid" / name).exists()


def test_bad_model_and_settings_are_named(tmp_path):
    bad = STUDY.format(budget=6).replace('kind = "ferromagnet_2d"', 'kind = "potts"')
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(ValueError, match="potts"):
        load_workflow(tmp_path / "bad.toml")
    bad = STUDY.format(budget=6).replace("side = 8", "sides = 8")
    (tmp_path / "bad2.toml").write_text(bad)
    with pytest.raises(ValueError, match="sides"):
        load_workflow(tmp_path / "bad2.toml")
