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
)
from stanaccel.diagnostics.report import write_report
from stanaccel.sampling import METHODS, make_config, sample
from stanaccel.stan import write_data
from stanaccel.workflow import run_workflow
from tests.sampling.programs import REGRESSION, regression_data


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
