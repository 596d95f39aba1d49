"""Workflow files are checked whole, keys and value types, before any step runs (no Stan compile here)."""

from pathlib import Path

import pytest

from stanaccel.cli import main
from stanaccel.datasets import generate
from stanaccel.stan import write_data
from stanaccel.workflow import load_workflow, run_workflow
from stanaccel.workflow.actions import ACTIONS, Action
from stanaccel.workflow.validation import (
    ANYTHING,
    INTEGER,
    NUMBER,
    STRING,
    Table,
    check_workflow,
    generator_options,
    keys_of,
)

WORKFLOWS = sorted((Path(__file__).parents[2] / "workflows").glob("*.toml"))

# A valid first step: NUTS on a bundled program, which would compile it if it ran.
HEAD = """
[workflow]
name = "checked"
seed = 4

[[steps]]
name = "first"
action = "nuts"
program = "mvn_mean"
data = "data.json"
chains = 1
warmup = 50
draws = 50
"""

NUTS = '[[steps]]\nname = "bad"\naction = "nuts"\nprogram = "mvn_mean"\n'
GENERATE = '[[steps]]\nname = "bad"\naction = "generate"\ngenerator = "gp_ard"\n'
APPROXIMATION = '[[steps]]\nname = "bad"\naction = "approximation_study"\n[[steps.samplers]]\nmethod = "dc"\n'
LATENT = '[[steps]]\nname = "bad"\naction = "latent_study"\n[[steps.samplers]]\nmethod = "ae-hmc"\n'
SAMPLE = '[[steps]]\nname = "bad"\naction = "sample"\nprogram = "mvn_mean"\n'
STEP = "step 'bad' "

BAD = {
    "misspelt [workflow] key": (
        HEAD.replace("seed = 4", 'seed = 4\noutptu = "elsewhere"'),
        [
            "[workflow] unknown key 'outptu'",
            "allowed: cache, executor, name, output, seed",
            "did you mean 'output'?",
        ],
    ),
    "bad generate key": (
        HEAD + GENERATE + "N = 20\nDD = 2\n",
        [STEP + "(action generate): unknown key 'DD'", "did you mean 'D'?"],
    ),
    "workflow seed not an integer": (
        HEAD.replace("seed = 4", 'seed = "abc"'),
        ["[workflow] seed = 'abc': expected a non-negative integer below 2**63"],
    ),
    "step seed not an integer": (
        HEAD + GENERATE + 'seed = "abc"\n',
        [STEP + "(action generate): seed = 'abc': expected a non-negative integer below 2**63"],
    ),
    "chains not an integer": (
        HEAD + NUTS + 'data = "data.json"\nchains = "four"\n',
        [STEP + "(action nuts): chains = 'four': expected an integer"],
    ),
    "misspelt NUTS setting": (
        HEAD + NUTS + 'data = "data.json"\nchians = 2\n',
        [STEP + "(action nuts): unknown key 'chians'", "chains, data, delta", "did you mean 'chains'?"],
    ),
    "unknown key in a study's sampler table": (
        HEAD + APPROXIMATION + "jmp = 4\n",
        [STEP + "(action approximation_study): samplers[0]: unknown key 'jmp'", "did you mean 'jump'?"],
    ),
    "wrong type in a study's sampler sweep": (
        HEAD + APPROXIMATION + 'sweep = { jump = [2, "four"] }\n',
        [STEP, "samplers[0].sweep.jump[1] = 'four': expected an integer"],
    ),
    "misspelt study warm-up": (
        HEAD + APPROXIMATION.replace("[[steps.samplers]]", 'warmup = "lapalce"\n[[steps.samplers]]'),
        [
            STEP + "(action approximation_study): warmup = 'lapalce': expected one of 'nuts', 'pathfinder', "
            "'laplace'",
            "did you mean 'laplace'?",
        ],
    ),
    "study warm-up given as iterations": (
        HEAD + APPROXIMATION + "sweep = { warmup = [300] }\n",
        [
            STEP,
            "samplers[0].sweep.warmup[0] = 300: expected one of",
            "the NUTS pilot's iterations are tune_warmup",
        ],
    ),
    "unknown key in a latent sampler": (
        HEAD + LATENT + "n_step = 4\n",
        [STEP + "(action latent_study): samplers[0]: unknown key 'n_step'", "did you mean 'latent_n_steps'?"],
    ),
    "unknown autoencoder option": (
        HEAD + LATENT + "[steps.autoencoder]\nlatent_dims = 3\n",
        [STEP, "autoencoder: unknown key 'latent_dims'", "did you mean 'latent_dim'?"],
    ),
    "data naming no earlier step": (
        HEAD + NUTS + 'data = "nothing"\n',
        [STEP + "(action nuts): data = 'nothing' names no earlier step and no file", "earlier steps: first"],
    ),
    "data naming a later step": (
        HEAD + NUTS + 'data = "later"\n' + GENERATE.replace('"bad"', '"later"'),
        [STEP + "(action nuts): data = 'later' names no earlier step"],
    ),
    "unknown top-level table": (
        HEAD + '[output]\nfolder = "elsewhere"\n',
        ["unknown table [output]; allowed: [workflow], [[steps]]"],
    ),
    "data naming a sampler step": (
        HEAD + SAMPLE + 'data = "first"\n',
        [
            STEP + "(action sample): data = 'first' names step 'first' (action nuts), which makes no data "
            "set: name a generate step (earlier ones: none), or a Stan JSON data file"
        ],
    ),
    "warmup_from naming a generate step": (
        HEAD
        + GENERATE.replace('"bad"', '"gen"')
        + "N = 10\n"
        + SAMPLE
        + 'data = "gen"\nwarmup_from = "gen"\n',
        [
            STEP + "(action sample): warmup_from = 'gen' names step 'gen' (action generate), which runs no "
            "Stan NUTS whose warm-up could be taken: name a nuts step, or a sample step with method 'nuts' "
            "(earlier ones: first)"
        ],
    ),
    "warmup_from naming a sample step of another method": (
        HEAD + SAMPLE.replace('"bad"', '"mh"') + 'method = "mh"\n' + SAMPLE + 'warmup_from = "mh"\n',
        [
            STEP
            + "(action sample): warmup_from = 'mh' names step 'mh' (action sample), which runs no Stan NUTS"
        ],
    ),
    "data naming both a step and a file": (
        HEAD + GENERATE.replace('"bad"', '"data.json"') + "N = 10\n" + NUTS + 'data = "data.json"\n',
        [
            STEP + "(action nuts): data = 'data.json' names both the earlier step 'data.json' and the file ",
            "data.json: rename the step, or write the file's path ('./data.json')",
        ],
    ),
    "report file naming a step's folder": (
        HEAD
        + GENERATE.replace('"bad"', '"x.html"')
        + '[[steps]]\nname = "bad"\naction = "report"\nfile = "x.html"\n',
        [
            STEP
            + "(action report): file = 'x.html' is the name of step 'x.html', whose folder is in the output"
        ],
    ),
    "misspelt method": (
        HEAD + SAMPLE + 'method = "hcm"\n',
        [STEP + "(action sample): method = 'hcm': expected one of", "did you mean 'hmc'?"],
    ),
    "empty output folder": (
        HEAD.replace("seed = 4", 'seed = 4\noutput = ""'),
        ["[workflow] output = '': expected a folder's path, not empty"],
    ),
}


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_every_workflow_file_validates(path):
    assert load_workflow(path).steps


def test_there_are_workflow_files():
    assert len(WORKFLOWS) >= 10


def _write(folder: Path, text: str) -> Path:
    write_data(folder / "data.json", generate("mvn_mean", N=10, D=2, seed=1).data)
    path = folder / "w.toml"
    path.write_text(text)
    return path


def test_the_valid_head_validates(tmp_path):
    assert [s["name"] for s in load_workflow(_write(tmp_path, HEAD)).steps] == ["first"]


@pytest.mark.parametrize("text, expected", BAD.values(), ids=BAD.keys())
def test_bad_settings_are_refused_before_anything_runs(tmp_path, monkeypatch, text, expected):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("STANACCEL_CACHE", str(cache))
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output=tmp_path / "out", progress=False)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    for part in expected:
        assert part in message
    assert not any(cache.iterdir())  # the first step's program was never compiled
    assert not (tmp_path / "out").exists()


def test_cli_run_reports_a_bad_key_without_a_traceback(tmp_path, capsys):
    text, expected = BAD["chains not an integer"]
    path = _write(tmp_path, text)
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and expected[0] in err and "Traceback" not in err


def test_settings_passed_to_a_function_follow_its_signature():
    class Kernel:
        pass

    def fit(data, *, n: int = 1, scale: float | None = None, name: str = "a", kernel: Kernel | None = None,
            anything=None, seed: int = 0):  # fmt: skip
        """The data are the caller's, a kernel object cannot be written in a file, the seed is skipped."""

    expected = {"n": INTEGER, "scale": NUMBER, "name": STRING, "anything": ANYTHING}
    assert keys_of(fit, skip=("seed",)) == expected
    options = generator_options("logistic")
    assert options["collinear"] is INTEGER and options["noise"] is NUMBER and "seed" not in options


def test_kinds_of_values():
    assert INTEGER.accepts(4) and not INTEGER.accepts(4.0) and not INTEGER.accepts(True)
    assert NUMBER.accepts(4) and NUMBER.accepts(0.5) and not NUMBER.accepts("0.5")


@pytest.mark.parametrize(
    "program, message",
    [
        ("gp_ardd", "no bundled program of that name.*did you mean 'gp_ard'"),
        ("mine.stan", "no such Stan program"),
    ],
)
def test_a_program_that_does_not_exist_is_named(tmp_path, program, message):
    path = tmp_path / "w.toml"
    path.write_text(f"[[steps]]\nname = 'nuts'\naction = 'nuts'\nprogram = '{program}'\n")
    with pytest.raises(ValueError, match=message):
        load_workflow(path)
    (tmp_path / "mine.stan").write_text("parameters { real y; }\n")
    if program == "mine.stan":
        load_workflow(path)  # a file beside the workflow file


def test_one_table_of_actions_drives_the_checks_and_the_help(tmp_path, capsys):
    """Each action's schema in ACTIONS is what the checks apply; `stanaccel run --help` lists each action."""
    path = tmp_path / "w.toml"
    actions = {"count": Action(lambda step, context, seed: {}, Table({"n": INTEGER}), "count to n")}
    check_workflow({"steps": [{"name": "a", "action": "count", "n": 3}]}, path, actions)
    with pytest.raises(ValueError, match="step 'a' \\(action count\\): unknown key 'm'; allowed: action, n"):
        check_workflow({"steps": [{"name": "a", "action": "count", "m": 3}]}, path, actions)
    with pytest.raises(ValueError, match="unknown action 'nuts'; have \\['count'\\]"):
        check_workflow({"steps": [{"name": "a", "action": "nuts"}]}, path, actions)

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    listed = capsys.readouterr().out.split("The actions a step may name")[1]
    for name, action in ACTIONS.items():
        assert f"\n  {name} " in listed and action.help.split()[-1] in listed


@pytest.mark.parametrize(
    ("arguments", "error", "said"),
    [
        ({"workflow": 5}, TypeError, r"workflow must be a workflow file .* or a Workflow; not int \(5\)"),
        ({"workflow": None}, TypeError, r"workflow must be a workflow file .*; not NoneType"),
        ({"workflow": {"steps": []}}, TypeError, r"workflow must be a workflow file .*; not dict"),
        ({"output": 5}, TypeError, r"output must be a folder \(a str or Path\), .*; not int \(5\)"),
        ({"output": ""}, ValueError, r"output is empty: give a folder name"),
        (
            {"cache": "no"},
            TypeError,
            r"cache must be True \(load unchanged steps\), False .*; not str \('no'\)",
        ),
    ],
)
def test_run_workflow_arguments_it_cannot_use_are_named(tmp_path, monkeypatch, arguments, error, said):
    monkeypatch.chdir(tmp_path)
    arguments = {"workflow": _write(tmp_path, HEAD), **arguments}
    with pytest.raises(error, match=said):
        run_workflow(**arguments, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.json", "w.toml"]  # nothing run, no folder


def test_warmup_from_a_step_of_another_program_is_refused_before_any_step(tmp_path, monkeypatch):
    """Found before the nuts step compiled and sampled (it was found after): the programs' parameters, by
    stanc alone."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("STANACCEL_CACHE", str(cache))
    (tmp_path / "other.stan").write_text("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n")
    text = (
        HEAD.replace('program = "mvn_mean"', 'program = "other.stan"')
        + GENERATE.replace('"bad"', '"gen"').replace("gp_ard", "mvn_mean")
        + '[[steps]]\nname = "bad"\naction = "sample"\ndata = "gen"\nmethod = "hmc"\nwarmup_from = "first"\n'
    )
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output=tmp_path / "out", progress=False)
    assert str(caught.value) == (
        f"{path}: step 'bad': warmup_from = 'first' names step 'first', which runs "
        f"{(tmp_path / 'other.stan').resolve()} (parameters mu); this step runs mvn_mean (parameters theta): "
        "a warm-up is for the same program (its step size, metric and points are per parameter); take it "
        "from a step on this program, or leave warmup_from out"
    )
    assert not any(cache.iterdir()) and not (tmp_path / "out").exists()


def test_the_program_of_each_generator_is_known_before_it_runs():
    from stanaccel.datasets import GENERATORS, PROGRAMS

    assert {name: generate(name).program for name in GENERATORS} == PROGRAMS


@pytest.mark.parametrize("where", ["folder", "latin-1"])
def test_a_workflow_file_that_is_a_folder_or_not_utf8_is_named(tmp_path, where):
    path = tmp_path if where == "folder" else tmp_path / "w.toml"
    if where == "latin-1":
        path.write_bytes(b'[workflow]\nname = "caf\xe9"\n')
    with pytest.raises(ValueError if where == "latin-1" else IsADirectoryError) as caught:
        load_workflow(path)
    assert (
        str(caught.value)
        == {
            "folder": f"workflow file {path} is a folder: give a workflow .toml file",
            "latin-1": f"{path}: not UTF-8 text (byte 0xe9 at offset 22); a TOML file is UTF-8: save it "
            "as UTF-8",
        }[where]
    )
