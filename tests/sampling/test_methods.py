"""The table of methods drives the command line's help and matches the README's table of methods."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from stanaccel.cli import main
from stanaccel.sampling import METHODS, keys, make_config, method_label, sample
from stanaccel.sampling.methods import method_spec, methods_in
from stanaccel.stan import write_data
from tests.sampling.programs import REGRESSION, regression_data
from tests.sampling.test_sample import SHORT, check_exact

README = Path(__file__).parents[2] / "README.md"
PACKAGE = Path(__file__).parents[2] / "pkg" / "stanaccel"
NAME = "|".join(map(re.escape, METHODS))
COMPARISON = re.compile(
    rf"""[=!]=\s*["'](?:{NAME})["']"""  # method == "dc", != "dc"
    rf"""|["'](?:{NAME})["']\s*[=!]="""  # "dc" == method
    rf"""|\bin\s*[(\[{{][^)\]}}]*["'](?:{NAME})["']"""  # in ("mh", "hmc"), not in [...], in {...}
)
"""A comparison with a method's name: code that branches on which method it is."""


def readme_methods_table() -> list[tuple[list[str], str]]:
    """The README's table of methods: per row, the methods it names and its "exact" column."""
    lines = README.read_text().splitlines()
    start = lines.index("| method | what it is | exact | needs of your program |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((re.findall(r"`([^`]+)`", cells[0]), cells[2]))
    return rows


def test_the_cli_help_lists_exactly_the_registry_methods(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps lines at hyphens ("latent-" / "nuts")
    with pytest.raises(SystemExit):
        main(["sample", "--help"])
    out = capsys.readouterr().out
    named = re.search(r"the sampler: (.*?) \(default", " ".join(out.split())).group(1).split(", ")
    assert named == list(METHODS)
    epilog = out[out.index("Settings of each method") :]
    listed = re.findall(r"^  (\S+): ", epilog, flags=re.MULTILINE)
    assert listed == list(METHODS)
    for method in METHODS:
        own = [k for k in keys(method) if k not in ("chains", "draws", "warmup")]
        assert f"  {method}: {', '.join(own)}" in epilog


def test_the_readme_table_of_methods_matches_the_registry():
    rows = readme_methods_table()
    assert [name for names, _ in rows for name in names] == list(METHODS)
    for names, exact in rows:
        for name in names:
            expected = {True: "yes", False: "no"}.get(METHODS[name].exact, "with `exact = true`")
            assert exact.startswith(expected), (name, exact)


def test_every_method_has_a_record_that_the_engine_reads():
    for name, spec in METHODS.items():
        config = make_config(name, {})
        assert spec.config is type(config) and spec.name == name
        assert method_label(config)  # every method has a label
        assert (spec.build is None) == (name in ("nuts", "latent-nuts"))
    assert method_label(make_config("dc", {"inner": "h-pcn"})) == "DC (h-pCN)"
    assert method_label(make_config("ae-pcn", {"exact": False})) == "AE-pCN (approximate)"
    assert methods_in("latent") == ("hmc", "ae-hmc", "ae-pcn", "latent-nuts")


def test_an_unknown_method_is_named_with_a_suggestion():
    with pytest.raises(ValueError, match="method = 'hcm': unknown method.*did you mean 'hmc'"):
        method_spec("hcm")


@pytest.fixture(scope="module")
def regression(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mala")
    (folder / "regression.stan").write_text(REGRESSION)
    write_data(folder / "regression.json", regression_data())
    return folder / "regression.stan", folder / "regression.json"


def test_mala_samples_the_known_posterior_with_its_step_tuned_after_the_warmup(regression):
    program, data = regression
    lines = []
    result = sample(program, data, "mala", SHORT, seed=11, progress=False, log=lines.append)
    check_exact(result, regression_data())
    assert result.sources["step_size"] == "tuned" and result.charged_seconds["tuning"] > 0
    assert any(line.startswith("tuned step") for line in lines)
    assert 0.35 < result.acceptance < 0.8  # Robbins-Monro aims at 0.574
    assert result.metrics()["sampler"] == "MALA"


def test_mala_keeps_the_users_step_size(regression):
    program, data = regression
    result = sample(program, data, "mala", {"warmup": 100, "draws": 20, "step_size": 0.05}, progress=False)
    assert result.config.step_size == 0.05 and result.sources["step_size"] == "user"
    assert "tuning" not in result.charged_seconds


def test_no_code_outside_the_table_of_methods_branches_on_method_names():
    assert COMPARISON.search('if method == "dc":') and COMPARISON.search('if r["method"] != "nuts"')
    assert COMPARISON.search('x not in ("mh", "hmc")') and COMPARISON.search("m in {'tt-approx'}")
    assert not COMPARISON.search('method: ClassVar[str] = "dc"') and not COMPARISON.search('k in ("method",)')
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "sampling" / "methods.py":
            continue
        text = path.read_text()
        for match in COMPARISON.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(PACKAGE)}:{line}: {match.group(0)}")
    assert not found, "read a field of MethodSpec (sampling/methods.py) instead:\n" + "\n".join(found)


def test_the_tempering_families_and_acceptances_of_interest():
    assert {m: s.tempering for m, s in METHODS.items() if s.tempering} == {
        "pt": "swaps",
        "tt": "transitions",
        "spt": "swaps",
        "stt": "transitions",
    }
    assert {m: s.acceptance_key for m, s in METHODS.items() if s.acceptance_key} == {
        "dc": "move_acceptance",
        "tt-approx": "tt_acceptance",
    }
    assert [m for m, s in METHODS.items() if s.is_inner] == ["mh", "hmc", "pcn", "h-pcn"]


def test_every_inner_kernel_choice_is_a_method_with_a_move():
    from dataclasses import fields

    for name, spec in METHODS.items():
        inner = next((f for f in fields(spec.config) if f.name == "inner"), None)
        if inner is not None:
            assert all(METHODS[choice].is_inner for choice in inner.metadata["choices"]), name


def test_imh_samples_the_known_posterior_from_the_command_line(regression, tmp_path, capsys):
    """``stanaccel sample --method imh``: exact on the known posterior, its acceptance reported."""
    import arviz as az

    from stanaccel.diagnostics import mcse_z_scores
    from tests.sampling.programs import regression_posterior
    from tests.sampling.test_sample import Z_LIMIT

    program, data = regression
    out = tmp_path / "imh.nc"
    arguments = ["sample", str(program), "--data", str(data), "--method", "imh", "--set", "batch=8"]
    code = main([*arguments, "--warmup", "300", "--draws", "1000", "--seed", "4", "-q", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "IMH (exact sampler;" in captured.out and "acceptance" in captured.out
    assert "independence proposals accepted (its efficiency) (mean over chains):" in captured.out
    idata = az.from_netcdf(out)
    mean, sd = regression_posterior(regression_data())
    z_mean, z_sd = mcse_z_scores(idata, "coef", mean, sd)
    assert np.all(np.abs(z_mean) < Z_LIMIT) and np.all(np.abs(z_sd) < Z_LIMIT), (z_mean, z_sd)
    metrics = json.loads((tmp_path / "imh.metrics.json").read_text())
    assert metrics["sampler"] == "IMH" and metrics["exact"] and metrics["charged_seconds"]["warmup"] > 0
    assert metrics["acceptance"] > 0.5  # a 2-d Gaussian posterior: the fitted t proposal is close
    assert len(metrics["method_statistics"]["proposal_acceptance"]) == 4 and not metrics["warnings"]
    assert metrics["settings"]["batch"] == 8 and metrics["settings"]["df"] == 7.0


def test_imh_settings_out_of_range_are_refused_before_any_work():
    with pytest.raises(ValueError, match=r"df.*2"):
        make_config("imh", {"df": 2})
    with pytest.raises(ValueError, match="batch"):
        make_config("imh", {"batch": 0})
