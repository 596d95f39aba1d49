"""``pt`` with its ladder adapted on a Stan program: the evidence against closed forms (and refused, with
the reason, where the prior is improper), and a bimodal posterior that NUTS gets wrong and
default-setting PT gets right."""

import json
from pathlib import Path

import arviz as az
import numpy as np
import pytest

from stanaccel.datasets import generate
from stanaccel.datasets.mvn_mean import exact_log_evidence
from stanaccel.diagnostics.metrics import EVIDENCE_MEANING
from stanaccel.kernels.schedule import levels_for_acceptance, levels_for_trajectories
from stanaccel.programs import program_path
from stanaccel.sampling import sample
from stanaccel.sampling.schedule import LADDER_FILE
from stanaccel.stan import compile_program, write_data
from tests.sampling.programs import BIMODAL, BIMODAL_LOG_EVIDENCE, BIMODAL_RIGHT, POOR_GAUSSIAN

QUIET = {"progress": False}


def evidence(result) -> tuple[float, float]:
    statistics = result.metrics()["method_statistics"]
    chains = np.asarray(statistics["log_evidence"])
    errors = np.asarray(statistics["log_evidence_mcse"])
    return float(chains.mean()), float(np.sqrt(np.sum(errors**2)) / len(errors))


@pytest.mark.slow
def test_pt_adapts_its_ladder_and_reports_the_evidence_of_a_conjugate_model(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    # 7 rounds (the default 8 is checked on the bimodal run) and 300 draws: half the time, and the evidence's
    # MCSE 0.066 here (seeds 1-8: 0.058-0.084, within 2.5 MCSE): 3 MCSE is 0.2, so 0.3 nats off fails
    config = {"warmup": 300, "draws": 300, "schedule_rounds": 7}
    result = sample(mvn_program, data, "pt", config, seed=3, **QUIET)
    log_z, mcse = evidence(result)
    assert abs(log_z - exact_log_evidence(data)) < 3 * mcse and mcse < 0.1
    metrics = result.metrics()
    schedule = metrics["schedule"]
    assert schedule["betas"][0] == 1 and schedule["betas"][-1] == 0  # down to the prior
    assert len(schedule["rounds"]) == 7 and schedule["levels"] == len(result.config.betas)
    assert metrics["setting_sources"]["betas"] == "adapted" and "schedule" in metrics["charged_seconds"]
    assert max(schedule["rounds"][-1]["rejection"]) < 0.5
    inner = np.asarray(schedule["rounds"][-1]["inner_acceptance"])  # each level's step adapted to 0.8
    assert np.all(np.abs(inner - 0.8) < 0.15) and schedule["step_factors"] == result.config.step_factors


def test_a_given_ladder_is_kept_and_given_levels_are_kept(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    given = sample(mvn_program, data, "pt", {"warmup": 200, "draws": 50, "betas": [1, 0.5, 0.2]}, **QUIET)
    assert given.config.betas == [1, 0.5, 0.2] and "schedule" not in given.metrics()
    assert "log_evidence" not in given.metrics()["method_statistics"]  # its ladder stops above 0
    levels = sample(mvn_program, data, "pt", {"warmup": 200, "draws": 50, "levels": 4, "schedule_rounds": 4},
                    **QUIET)  # fmt: skip
    assert len(levels.config.betas) == 5 and levels.metrics()["schedule"]["levels"] == 5


def test_a_run_that_continues_a_checkpoint_takes_the_ladder_placed_there(mvn_program, tmp_path):
    """The placement is seeded, so a run continuing the chains in a checkpoint folder (a resumed step,
    ``auto``'s pilot going on) would place the same ladder again: it takes the one kept there, with the
    seconds it took; a run of other seeds places its own."""
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    config = {"warmup": 150, "draws": 40, "levels": 3, "schedule_rounds": 3}
    lines: list[str] = []

    def run(seed: int):
        lines.clear()
        return sample(
            mvn_program, data, "pt", config, seed=seed, checkpoint=tmp_path, log=lines.append, **QUIET
        )

    first = run(5)
    assert (
        sum(line.startswith("placing the ladder") for line in lines) == 1
        and (tmp_path / LADDER_FILE).is_file()
    )
    again = run(5)
    assert not any(line.startswith("placing the ladder") for line in lines), lines
    assert any("as an earlier run of these chains placed it" in line for line in lines), lines
    assert again.metrics()["schedule"] == first.metrics()["schedule"]
    assert again.charged_seconds["schedule"] == first.charged_seconds["schedule"]
    np.testing.assert_array_equal(again.run.positions, first.run.positions)
    run(6)
    assert sum(line.startswith("placing the ladder") for line in lines) == 1, lines


def test_spt_places_its_levels_on_whole_distinct_subsets(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    result = sample(mvn_program, data, "spt", {"warmup": 200, "draws": 50, "schedule_rounds": 5}, seed=3,
                    **QUIET)  # fmt: skip
    sizes = np.asarray(result.config.betas) * 20
    assert len(sizes) <= 7 and sizes[0] == 20 and np.all(np.diff(sizes) < 0)  # levels = 6, not the barrier's
    np.testing.assert_allclose(sizes, np.round(sizes))
    assert [len(r["betas"]) for r in result.metrics()["schedule"]["rounds"]] == [7] * 5


@pytest.fixture(scope="module")
def bimodal(tmp_path_factory):
    path = tmp_path_factory.mktemp("bimodal") / "bimodal.stan"
    path.write_text(BIMODAL)
    return compile_program(path)


def right_share(result) -> float:
    return float((result.to_inference_data().posterior["theta"].values[..., 0] > 0).mean())


@pytest.mark.slow
def test_default_pt_recovers_the_mode_weights_that_nuts_misses(bimodal):
    nuts = sample(bimodal, {}, "nuts", {"warmup": 300, "draws": 500}, seed=2, **QUIET)
    assert abs(right_share(nuts) - BIMODAL_RIGHT) > 0.05  # each chain stays in the mode it started in
    pt = sample(bimodal, {}, "pt", {"draws": 2000}, seed=2, **QUIET)
    assert len(pt.metrics()["schedule"]["rounds"]) == 8  # the default rounds placed the ladder
    right = pt.to_inference_data().posterior["theta"].values[..., 0] > 0
    mcse = az.mcse(right.astype(float)).item()  # 0.017 here: 0.685 (seeds 1-8 of 1000 draws: 0.615-0.699)
    assert abs(right.mean() - BIMODAL_RIGHT) < min(0.05, 4 * mcse), (right.mean(), mcse)
    log_z, mcse = evidence(pt)
    assert abs(log_z - BIMODAL_LOG_EVIDENCE) < 3 * mcse and mcse < 0.15
    modes = pt.metrics()["modes"]  # the warm-up's NUTS chains settled in both modes, and pt says so
    assert len(modes["regions"]) == 2 and "separated regions" in modes["message"]


@pytest.mark.slow
def test_tempered_transitions_take_the_pilot_barrier_with_the_levels_trajectories_need(mvn_program):
    data = generate("mvn_mean", N=20, D=3, seed=7).data
    # 100 draws: the ladder is placed before them (so it is the same as with more), and the acceptance,
    # 0.27 with 100 or 300, has a standard error of about 0.02 from 4 x 100 proposals.
    result = sample(mvn_program, data, "tt", {"warmup": 300, "draws": 100, "schedule_rounds": 6}, seed=3,
                    **QUIET)  # fmt: skip
    schedule = result.metrics()["schedule"]
    [pilot] = schedule["trajectory_pilot"]  # the model's count, then the pilot's correction
    assert pilot["levels"] == levels_for_trajectories(schedule["barrier"])
    assert len(result.config.betas) == levels_for_acceptance(pilot["levels"], pilot["acceptance"])
    assert result.config.betas[-1] == 0 and schedule["levels"] == len(result.config.betas)
    assert 0.15 < np.mean(result.metrics()["method_statistics"]["tt_acceptance"]) < 0.6  # aimed at 0.3


LADDER = "betas=[1.0, 0.3, 0.1, 0.0]"  # given, so that no ladder is placed


def run_cli(program, data: Path, tmp_path: Path, capsys) -> tuple[dict, str, str]:
    from stanaccel.cli import main

    out = tmp_path / "pt.nc"
    code = main(["sample", str(program), "--data", str(data), "--method", "pt", "--set", LADDER,
                 "--warmup", "300", "--draws", "300", "--seed", "1", "-q", "-o", str(out)])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads((tmp_path / "pt.metrics.json").read_text()), printed.out, printed.err


@pytest.mark.slow
def test_pt_gives_no_evidence_for_an_improper_prior_and_says_why(tmp_path, capsys):
    # Case 6: b is in no term, so the beta = 0 level (and the posterior) is improper: it has no evidence.
    program = tmp_path / "poor.stan"
    program.write_text(POOR_GAUSSIAN)
    write_data(tmp_path / "data.json", {"case_": 6, "K": 0, "beta": 1.0})
    metrics, out, err = run_cli(program, tmp_path / "data.json", tmp_path, capsys)
    evidence = metrics["evidence"]
    assert evidence["log_evidence"] is None and "did not settle" in evidence["not_given"]
    assert evidence["description"] == EVIDENCE_MEANING
    assert "log_evidence" not in metrics["method_statistics"]  # no number anywhere
    assert "log evidence: not given: the beta = 0 level's draws did not settle" in out
    assert "log evidence: not given" in err  # said at run time too
    assert "p(data)" not in out.replace(EVIDENCE_MEANING, "")  # never shown as log p(data) alone


@pytest.mark.slow
def test_pt_says_what_its_evidence_is(tmp_path, capsys):
    write_data(tmp_path / "data.json", generate("mvn_mean", N=20, D=3, seed=7).data)
    metrics, out, _ = run_cli(program_path("mvn_mean"), tmp_path / "data.json", tmp_path, capsys)
    evidence = metrics["evidence"]
    assert evidence["description"] == EVIDENCE_MEANING and "not_given" not in evidence
    assert evidence["log_evidence"] == pytest.approx(np.mean(metrics["method_statistics"]["log_evidence"]))
    assert f"{EVIDENCE_MEANING}; by stepping stone over the ladder (mean over chains): " in out
