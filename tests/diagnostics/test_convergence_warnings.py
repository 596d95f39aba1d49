"""Runs that have not converged, or whose method mixes poorly, say so everywhere.

Real Stan programs and real runs, kept short: the bundled ``mvn_mean`` (Random-walk
Metropolis with a tiny scale from a short warm-up does not converge; Stan NUTS does;
tempered transitions from the posterior to a near-prior level reject almost every
trajectory) and the tests' regression program (the discretizing chain over a
two-observation subset with long jumps accepts no mark move). Each is checked on the
command line (stdout, exit status 0), in ``metrics.json`` and, for a workflow, in
its console lines and the HTML report.
"""

import json
import re

import pytest

from stanaccel.cli import main
from stanaccel.datasets import generate
from stanaccel.diagnostics.metrics import (
    REJECTED_LABEL,
    convergence_warnings,
    method_warnings,
    statistics_lines,
    warning_block,
)
from stanaccel.diagnostics.report import write_report
from stanaccel.sampling import METHODS, make_config, sample
from stanaccel.sampling.warmup import WarmupWarning
from stanaccel.stan import StanModel, compile_program, write_data
from stanaccel.stan.nuts import sample_nuts
from stanaccel.workflow import run_workflow
from tests.sampling.programs import POOR_GAUSSIAN, REGRESSION, regression_data


@pytest.fixture(scope="module")
def poor_program(tmp_path_factory):
    path = tmp_path_factory.mktemp("poor") / "poor.stan"
    path.write_text(POOR_GAUSSIAN)
    return compile_program(path)


@pytest.fixture(scope="module")
def mvn_data(tmp_path_factory, mvn_program):
    path = tmp_path_factory.mktemp("data") / "mvn.json"
    write_data(path, generate("mvn_mean", N=20, D=3, seed=1).data)
    return path


def _sample(path, data, tmp_path, *options):
    out = tmp_path / "fit.nc"
    code = main(["sample", str(path), "--data", str(data), "--chains", "2", "-q", "-o", str(out), *options])
    return code, json.loads((tmp_path / "fit.metrics.json").read_text())


def test_cli_flags_a_run_that_has_not_converged(mvn_data, tmp_path, capsys):
    code, metrics = _sample(
        "mvn_mean", mvn_data, tmp_path, "--method", "mh", "--set", "scale=0.01", "--warmup", "100",
        "--draws", "100",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0  # a warning, not an error
    assert "MH (exact sampler; NOT CONVERGED" in out and "(UNRELIABLE: not converged)" in out
    assert "WARNING: NOT CONVERGED" in out and re.search(r"R-hat \S+ \(theta\[\d\]\) is above 1.01", out)
    assert "bulk ESS" in out and "below 200 (100 per chain)" in out
    assert metrics["converged"] is False
    assert any(w.startswith("R-hat") for w in metrics["warnings"])
    assert any(w.startswith("bulk ESS") for w in metrics["warnings"])


def test_a_run_of_too_few_draws_for_rhat_and_ess_has_not_converged(mvn_data, tmp_path, capsys):
    # 3 draws per chain: R-hat and ESS are NaN, which passed every check ("converged"), and metrics.json
    # held a bare NaN, which JSON has not (JavaScript's and jq's readers refuse it).
    options = ["--method", "nuts", "--warmup", "100", "--draws", "3", "-q", "-o", str(tmp_path / "fit.nc")]
    code = main(["sample", "mvn_mean", "--data", str(mvn_data), "--chains", "2", *options])
    out = capsys.readouterr().out
    reason = (
        "fewer than 4 kept draws per chain (3): R-hat and ESS are not defined; run more draws (or thin less)"
    )
    assert code == 0 and "NOT CONVERGED" in out and f"  - {reason}\n" in out
    metrics = json.loads((tmp_path / "fit.metrics.json").read_text(), parse_constant=pytest.fail)
    assert metrics["converged"] is False and metrics["warnings"] == [reason]
    assert metrics["rhat_max"] is None and metrics["ess_bulk_min"] is None


def test_rhat_or_ess_that_is_not_defined_is_a_reason():
    nan = float("nan")
    stuck = {"chains": 2, "draws_per_chain": 500, "rhat_max": nan, "ess_bulk_min": nan, "ess_tail_min": nan}
    assert convergence_warnings(stuck) == [
        "R-hat, bulk ESS, tail ESS not defined for any quantity: every quantity kept one value in every draw "
        "(the chains did not move), so the draws say nothing"
    ]
    read_back = {
        "chains": 1,
        "draws_per_chain": 2,
        "rhat_max": None,
        "ess_bulk_min": None,
        "ess_tail_min": 300.0,
    }
    assert convergence_warnings(read_back) == [  # null in metrics.json; one chain has no R-hat to miss
        "fewer than 4 kept draws per chain (2): R-hat and ESS are not defined; run more draws (or thin less)"
    ]
    assert (
        convergence_warnings({"chains": 1, "rhat_max": nan, "ess_bulk_min": 500, "ess_tail_min": 500}) == []
    )


def test_a_value_just_past_its_limit_is_shown_with_the_digits_that_say_so():
    metrics = {"chains": 4, "rhat_max": 1.0134, "ess_bulk_min": 399.6, "ess_tail_min": 1234.4}
    assert [reason.split(":")[0] for reason in convergence_warnings(metrics)] == [
        "R-hat 1.013 is above 1.01",
        "bulk ESS 399.6 is below 400 (100 per chain)",
    ]
    assert convergence_warnings({"chains": 4, "rhat_max": 9863944627761746.0})[0].startswith(
        "R-hat 9.86e+15 is above 1.01"
    )
    [reason] = method_warnings({"tt_acceptance": [0.0996, 0.5]})
    assert reason.startswith("trajectory acceptance 0.0996 in chain 0 is below 0.1")


def test_proposals_the_program_rejects_are_counted_as_such_not_as_divergences(reject_program):
    result = sample(reject_program, None, "hmc", {"warmup": 300, "chains": 2, "draws": 1000}, seed=1,
                    progress=False)  # fmt: skip
    metrics = result.metrics()
    assert metrics["rejected_by_program"] > 0 and metrics["divergences"] == 0
    assert metrics["converged"] is True and metrics["warnings"] == []
    assert f"{REJECTED_LABEL}: {metrics['rejected_by_program']}" in statistics_lines(metrics)


def test_stan_nuts_counts_the_programs_rejections_apart_from_divergences(reject_program, tmp_path, capsys):
    # Stan's Hamiltonian takes the energy where the log density threw (a reject) for infinite, so Stan's NUTS
    # reports a divergence there; the bridge notes the rejection, and NUTS counts it as the kernels do.
    model = StanModel(reject_program)
    fit = sample_nuts(model, chains=2, warmup=200, draws=500, seed=1, progress=False)
    assert fit.sample_stats["failed"].sum() > 0 and fit.sample_stats["diverging"].sum() == 0
    metrics = fit.metrics()
    assert metrics["rejected_by_program"] > 0 and metrics["divergences"] == 0 and metrics["converged"] is True
    chunked = sample_nuts(model, chains=2, warmup=200, draws=500, seed=1, progress=False,
                          checkpoint=tmp_path / "chunks", checkpoint_draws=100)  # fmt: skip
    assert chunked.sample_stats["failed"].sum() > 0 and chunked.sample_stats["diverging"].sum() == 0
    (tmp_path / "reject.stan").write_text(reject_program.code)
    args = ["nuts", str(tmp_path / "reject.stan"), "--chains", "2", "-q", "-o", str(tmp_path / "r.nc")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "0 divergences, 0 at the largest tree depth; converged;" in out and "WARNING" not in out
    assert re.search(re.escape(REJECTED_LABEL) + r": [1-9]", out)


def test_a_divergence_of_stan_nuts_stays_a_divergence(poor_program):
    # case 1 is a funnel: NUTS diverges in its neck, where the log density is defined everywhere
    model = StanModel(poor_program, {"case_": 1, "K": 9, "beta": 1.0})
    fit = sample_nuts(model, chains=2, warmup=200, draws=300, seed=2, progress=False)
    assert fit.sample_stats["diverging"].sum() > 0 and fit.sample_stats["failed"].sum() == 0
    assert fit.metrics()["divergences"] == fit.sample_stats["diverging"].sum()


@pytest.mark.parametrize(("warmup", "runs"), [("pathfinder", "Pathfinder's 4 paths"),
                                              ("laplace", "L-BFGS from 4 starts")])  # fmt: skip
def test_chains_that_all_settled_in_one_of_the_modes_the_warmup_found_have_not_converged(
    poor_program, warmup, runs
):
    # b has two equal modes (case 4): the cheap warm-up's runs end at both, so NUTS's warm-up runs, and at
    # seed 3 both its chains settle at b = -3. They agree (R-hat, ESS and all else are fine) and are wrong.
    settings = {"warmup": warmup, "draws": 500, "chains": 2}
    with pytest.warns(WarmupWarning, match="more than one mode"):
        result = sample(poor_program, {"case_": 4, "K": 2}, "hmc", settings, seed=3, progress=False)
    metrics = result.metrics()
    assert metrics["converged"] is False and metrics["modes"]["unvisited"]
    [reason] = metrics["warnings"]
    assert reason.startswith(
        f"the warm-up found 2 separated modes ({runs} ended there), and no draw came near 1 of them "
        "(unconstrained: b = 3"
    )
    assert "WARNING: NOT CONVERGED" in warning_block(metrics)


def test_auto_nuts_at_once_with_every_chain_in_one_of_two_modes_has_not_converged(poor_program):
    # b has two equal modes (case 4), and the posterior is cheap: auto runs Stan's NUTS at once. At seed 3
    # both chains settle at b = -3 and agree (R-hat 1): it said "converged". L-BFGS from the Laplace
    # warm-up's mirrored starts ends at both modes, and no draw came near b = 3.
    result = sample(poor_program, {"case_": 4, "K": 2}, "auto", {"draws": 1000, "chains": 2}, seed=3,
                    progress=False)  # fmt: skip
    metrics = result.metrics()
    assert result.reports["auto"]["pilots"] == [] and metrics["rhat_max"] < 1.01
    assert metrics["converged"] is False
    [reason] = metrics["warnings"]
    assert reason.startswith(
        "auto's modes check found 2 separated modes (L-BFGS from 4 starts ended there), and no draw came "
        "near 1 of them (unconstrained: b = 3"
    )


def test_what_a_stage_found_against_convergence_is_a_reason():
    settled = {
        "chains": 4,
        "draws_per_chain": 1000,
        "rhat_max": 1.001,
        "ess_bulk_min": 3000,
        "ess_tail_min": 3000,
    }
    assert convergence_warnings(settled) == []
    unresolved = {
        **settled,
        "auto": {"chosen": "nuts", "modes": {"gap": 11.8, "disagree": True, "unresolved": True}},
    }
    [reason] = convergence_warnings(unresolved)
    assert reason.startswith(
        "auto's pilots' chains disagreed about the modes (chain means 11.8 within-chain sds "
    )
    assert "nuts cannot move between them" in reason
    improper = {
        **settled,
        "evidence": {"not_given": "...", "posterior_problem": "the posterior's draws did not"},
    }
    assert convergence_warnings(improper) == ["the posterior looks improper: the posterior's draws did not"]
    prior_only = {**settled, "evidence": {"not_given": "the beta = 0 level's draws did not settle"}}
    assert (
        convergence_warnings(prior_only) == []
    )  # the prior alone is improper: the posterior's draws settled


HINTS = {
    "nuts": "raise the target acceptance (delta) or reparametrise",
    "hmc": "lower step_size or reparametrise",
    "mh": "reparametrise",
}


@pytest.mark.parametrize("method", HINTS)
def test_the_divergence_hint_names_only_a_setting_the_method_has(method):
    config = make_config(method)
    metrics = {"chains": 4, "draws_per_chain": 100, "divergences": 3, "settings": config.as_dict(),
               "step_setting": METHODS[method].step_key(config)}  # fmt: skip
    [reason] = convergence_warnings(metrics)
    assert reason == (
        "3 of 400 transitions diverged: the sampler could not follow the posterior somewhere, so the draws "
        f"may be biased; {HINTS[method]}"
    )


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # R-hat of stuck chains
@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
def test_a_run_that_accepts_nothing_says_so_and_names_its_step(tmp_path):
    (tmp_path / "regression.stan").write_text(REGRESSION)
    write_data(tmp_path / "data.json", regression_data())
    result = sample(tmp_path / "regression.stan", tmp_path / "data.json", "mala",
                    {"step_size": 1e5, "chains": 2, "draws": 200}, seed=1, progress=False)  # fmt: skip
    metrics = result.metrics()
    assert metrics["acceptance"] < 0.01 and metrics["converged"] is False
    assert metrics["warnings"][0] == (
        "acceptance 0.00 is below 0.01: almost every proposal was rejected, so the chains hardly moved; the "
        "proposals reach too far: lower step_size (it is 100000)"
    )


def test_cli_nuts_says_a_converged_run_converged_and_flags_the_tree_depth(mvn_data, tmp_path, capsys):
    common = ["nuts", "mvn_mean", "--data", str(mvn_data), "--chains", "2", "--warmup", "200", "-q"]
    assert main([*common, "--draws", "400", "-o", str(tmp_path / "a.nc")]) == 0
    out = capsys.readouterr().out
    assert "0 divergences, 0 at the largest tree depth; converged;" in out and "WARNING" not in out
    assert main([*common, "--draws", "100", "--max-depth", "1", "-o", str(tmp_path / "b.nc")]) == 0
    out = capsys.readouterr().out
    assert "NOT CONVERGED" in out and "200 of 200 transitions hit the largest tree depth 1" in out


def test_tempered_transitions_show_and_flag_their_trajectory_acceptance(mvn_program, tmp_path, capsys):
    data = tmp_path / "mvn2000.json"  # a likelihood much narrower than the prior
    write_data(data, generate("mvn_mean", N=2000, D=3, seed=1).data)
    code, metrics = _sample(
        "mvn_mean", data, tmp_path, "--method", "tt", "--set", "levels=1", "--set", "beta_min=0.01",
        "--warmup", "200", "--draws", "100",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    accepted = metrics["method_statistics"]["tt_acceptance"]
    assert len(accepted) == 2 and max(accepted) < 0.1
    assert "tempered-transition acceptance (mean over chains):" in out
    assert re.search(r"trajectory acceptance \S+ in chain \d is below 0.1", out)
    assert any(w.startswith("trajectory acceptance") for w in metrics["warnings"])


def test_discretizing_chain_shows_and_flags_its_mark_acceptance(tmp_path, capsys):
    (tmp_path / "regression.stan").write_text(REGRESSION)
    write_data(tmp_path / "data.json", regression_data(n=400))
    options = ["--method", "dc", "--warmup", "200", "--draws", "100", "--set", 'approx={kind="subset", m=2}',
               "--set", 'observations={count="N", fields=["x", "y"]}', "--set", "inner=mh"]  # fmt: skip
    code, metrics = _sample(tmp_path / "regression.stan", tmp_path / "data.json", tmp_path, *options, "--set",
                            "jump=10")  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    stats = metrics["method_statistics"]
    assert max(stats["move_acceptance"]) < 0.05 and len(stats["cache_hit_fraction"]) == 2
    assert "mark acceptance (moves accepted on the posterior) (mean over chains):" in out
    assert "cache hits (share of exact evaluations saved)" in out
    assert any(w.startswith("mark acceptance") for w in metrics["warnings"])
    assert re.search(r"mark acceptance \S+ in chain \d is below 0.05", out)

    code, metrics = _sample(tmp_path / "regression.stan", tmp_path / "data.json", tmp_path, *options)
    assert code == 0 and min(metrics["method_statistics"]["move_acceptance"]) > 0.05
    assert not any(w.startswith("mark acceptance") for w in metrics["warnings"])


WORKFLOW = """
[workflow]
name = "convergence"
seed = 3

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 20
D = 3

[[steps]]
name = "nuts"
action = "nuts"
program = "mvn_mean"
data = "data"
chains = 2
warmup = 200
draws = 400

[[steps]]
name = "stuck"
action = "sample"
method = "mh"
scale = 0.01
data = "data"
chains = 2
warmup = 100
draws = 100

[[steps]]
name = "pt"
action = "sample"
method = "pt"
inner = "mh"
levels = 3
data = "data"
chains = 2
warmup = 100
draws = 100
"""


@pytest.mark.slow
def test_workflow_console_metrics_and_report_flag_the_run_that_has_not_converged(
    mvn_program, tmp_path, capsys
):
    (tmp_path / "w.toml").write_text(WORKFLOW)
    context = run_workflow(tmp_path / "w.toml", output=tmp_path / "out", progress=False)
    out = capsys.readouterr().out
    assert "ESS/s (min of bulk and tail) (UNRELIABLE: NOT CONVERGED)" in out
    assert "  WARNING: NOT CONVERGED" in out
    assert "swap acceptance per neighbouring pair of levels (mean over chains):" in out
    assert "round trips of the hottest and coldest level (all chains):" in out
    nuts = json.loads((context.output / "nuts" / "metrics.json").read_text())
    stuck = json.loads((context.output / "stuck" / "metrics.json").read_text())
    pt = json.loads((context.output / "pt" / "metrics.json").read_text())
    assert nuts["converged"] is True and nuts["warnings"] == [] and nuts["max_tree_depth_hits"] == 0
    assert stuck["converged"] is False and stuck["warnings"]
    assert len(pt["method_statistics"]["swap_acceptance"]) == 2  # per chain, each a list per pair
    assert len(pt["method_statistics"]["swap_acceptance"][0]) == 3

    html = write_report(context.output).read_text()
    section = r'<section class="step sampler" id="step-(\w+)">(.*?)</section>'
    sections = {m.group(1): m.group(2) for m in re.finditer(section, html, re.S)}
    assert '<span class="badge unconverged">NOT CONVERGED</span>' in sections["stuck"]
    assert "Not converged:" in sections["stuck"] and "R-hat" in sections["stuck"]
    assert "per second, charges included (unreliable: not converged)" in sections["stuck"]
    assert '<span class="badge converged">converged</span>' in sections["nuts"]
    assert "unconverged" not in sections["nuts"] and "unreliable" not in sections["nuts"]
    assert "transitions at the largest tree depth (10)" in sections["nuts"]
    overview = re.search(r'<table id="overview-table">(.*?)</table>', html, re.S).group(1)
    rows = {re.search(r'href="#step-(\w+)"', r).group(1): r for r in overview.split("<tr")[2:]}
    assert (
        'class="unconverged"' in rows["stuck"]
        and '<span class="unreliable">unreliable</span>' in rows["stuck"]
    )
    assert 'class="unconverged"' not in rows["nuts"] and "unreliable" not in rows["nuts"]
