"""A workflow writes only inside its output folder, and starting a step afresh removes only what it wrote.

The steps are ``generate`` steps: no Stan program is compiled or sampled.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from stanaccel.cli import main
from stanaccel.workflow import load_workflow, run_workflow
from stanaccel.workflow.cache import MANIFEST, MARKER, STARTED, record_written, start
from stanaccel.workflow.context import Workflow

WORKFLOW = """
[workflow]
name = "{workflow}"
seed = 3

[[steps]]
name = "{step}"
action = "generate"
generator = "mvn_mean"
N = {n}
D = 2
"""


def _workflow(folder, step="data", n=10, workflow="names"):
    path = folder / "w.toml"
    path.write_text(WORKFLOW.format(step=step, n=n, workflow=workflow))
    return path


def _listing(folder):
    return sorted((str(p.relative_to(folder)), p.read_bytes()) for p in folder.rglob("*") if p.is_file())


def _cached(output):
    return {s["name"]: s["cached"] for s in json.loads((output / "run.json").read_text())["steps"]}


@pytest.fixture
def victim(tmp_path):
    """A folder beside the output folder that stanaccel never wrote: a user's notes."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "notes.txt").write_text("my thesis notes\n")
    return folder


NAMES = {
    "../victim": "it holds a path separator, / or \\",
    "..": "'..' is a path to a folder, not a name",
    ".": "'.' is a path to a folder, not a name",
    "/abs": "it is an absolute path",
    "a/b": "it holds a path separator",
    "a\\\\b": "it holds a path separator",  # TOML's escape: the name a\b
    "": "it is empty",
    "a\\u0001b": "it holds a control character",
    "a\\u200bb": "it holds an invisible character, U+200B (ZERO WIDTH SPACE), which makes look-alike names",
    ".key": "it starts with a dot",
    "run.json": "the run writes a file of that name in the output folder",
}


@pytest.mark.parametrize("name, rule", NAMES.items(), ids=list(NAMES))
def test_a_step_name_that_is_not_a_plain_folder_name_is_refused_before_any_step(tmp_path, victim, name, rule):
    before = _listing(tmp_path)
    path = _workflow(tmp_path, step=name)
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output=tmp_path / "out", progress=False)
    message = str(caught.value)
    shown = json.loads(f'"{name}"')  # the name as TOML (and JSON) read it
    assert message.startswith(f"{path}: step {shown!r}: its name is not a plain folder name: {rule}")
    assert "a step's name is its folder in the output folder" in message
    assert not (tmp_path / "out").exists()
    assert _listing(tmp_path) == [*before, ("w.toml", path.read_bytes())]  # nothing else touched


def test_the_command_line_refuses_a_step_named_dot_dot_and_touches_nothing(tmp_path, victim, capsys):
    path = _workflow(victim, step="..")
    before = _listing(tmp_path)
    assert main(["run", str(path), "-o", str(victim / "out"), "-q"]) == 2
    assert "step '..': its name is not a plain folder name" in capsys.readouterr().err
    assert _listing(tmp_path) == before


def test_a_workflow_made_in_python_is_checked_too(tmp_path, victim):
    steps = [{"name": "../victim", "action": "generate", "generator": "mvn_mean", "N": 10, "D": 2}]
    workflow = Workflow(name="python", seed=1, output=tmp_path / "out", steps=steps)
    with pytest.raises(ValueError, match=r"step '../victim': its name is not a plain folder name"):
        run_workflow(workflow, progress=False)
    assert _listing(victim) == [("notes.txt", b"my thesis notes\n")]


@pytest.mark.parametrize(
    "text, message",
    [
        ('name = "../up"', "[workflow] name = '../up' is not a plain file name: it holds a path separator"),
        (
            '[[steps]]\nname = "page"\naction = "report"\nfile = "../page.html"',
            "step 'page' (action report): file = '../page.html' is not a plain file name",
        ),
        (
            '[[steps]]\nname = "page"\naction = "report"\nfile = "page.htm"',
            "file = 'page.htm' is not a plain file name: it does not end in .html",
        ),
    ],
    ids=["workflow-name", "report-file-path", "report-file-suffix"],
)
def test_the_workflow_name_and_a_report_file_are_plain_names(tmp_path, text, message):
    path = _workflow(tmp_path)
    body = path.read_text()
    path.write_text(body.replace('name = "names"', text) if text.startswith("name") else body + text + "\n")
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output=tmp_path / "out", progress=False)
    assert message in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_a_step_started_afresh_keeps_the_files_stanaccel_did_not_write(tmp_path, victim):
    out = tmp_path / "out"
    run_workflow(_workflow(tmp_path, n=10), output=out, progress=False)
    step = out / "data"
    first = (step / "data.json").read_bytes()
    (step / "notes.txt").write_text("a user's notes\n")
    (step / "mine").mkdir()
    (step / "mine" / "plot.py").write_text("print('mine')\n")
    (step / "elsewhere").symlink_to(victim, target_is_directory=True)

    run_workflow(_workflow(tmp_path, n=12), output=out, progress=False)  # a setting changed: afresh
    assert _cached(out) == {"data": False}
    assert (step / "data.json").read_bytes() != first  # rewritten
    assert (step / "notes.txt").read_text() == "a user's notes\n"
    assert (step / "mine" / "plot.py").read_text() == "print('mine')\n"
    assert (step / "elsewhere").is_symlink()
    assert _listing(victim) == [("notes.txt", b"my thesis notes\n")]

    (step / "notes.txt").write_text("a user's notes, edited after the run\n")
    run_workflow(_workflow(tmp_path, n=12), output=out, progress=False)
    assert _cached(out) == {"data": True}  # the notes are not an output whose size the cache checks

    run_workflow(_workflow(tmp_path, n=12), output=out, progress=False, cache=False)  # --recompute
    assert _cached(out) == {"data": False}
    assert (step / "notes.txt").read_text() == "a user's notes, edited after the run\n"
    assert (step / "mine" / "plot.py").is_file() and (step / "data.json").is_file()
    assert _listing(victim) == [("notes.txt", b"my thesis notes\n")]


def test_a_stopped_step_owns_what_appeared_after_it_started(tmp_path):
    step = tmp_path / "step"
    step.mkdir()
    (step / "notes.txt").write_text("there before the step\n")
    start(step, "key-1")
    (step / "checkpoints").mkdir()
    (step / "checkpoints" / "chain-0.pkl").write_bytes(b"draws")  # then the run was killed
    (step / "posterior.nc").write_bytes(b"part")
    start(step, "key-1")  # the same settings: resumed, everything kept
    assert (step / "checkpoints" / "chain-0.pkl").is_file() and (step / "posterior.nc").is_file()
    start(step, "key-2")  # changed settings: afresh
    assert sorted(p.name for p in step.iterdir()) == [MANIFEST, STARTED, "notes.txt"]
    assert json.loads((step / MANIFEST).read_text()) == {"before": ["notes.txt"]}


def test_a_file_added_after_a_step_stopped_is_not_the_steps_own(tmp_path):
    step = tmp_path / "step"
    start(step, "key-1")
    (step / "posterior.nc").write_bytes(b"part")
    record_written(step)  # what the runner does when a step fails or is stopped
    (step / "notes.txt").write_text("written after the stop\n")
    start(step, "key-2")
    assert sorted(os.listdir(step)) == [MANIFEST, STARTED, "notes.txt"]


STOPPED = """
[workflow]
name = "stopped"
seed = 3

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 10
D = 2

[[steps]]
name = "nuts"
action = "nuts"
program = "mvn_mean"
data = "data"
chains = 2
warmup = 100
draws = {draws}
"""


@pytest.mark.slow
def test_a_step_stopped_by_sigterm_then_changed_keeps_the_notes_added_after_the_stop(tmp_path, mvn_program):
    path, out = tmp_path / "w.toml", tmp_path / "out"
    path.write_text(STOPPED.format(draws=100000000))
    command = [sys.executable, "-m", "stanaccel.cli", "run", str(path), "-o", str(out), "-q"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "NUTS on" in line:
            break
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    output = "".join(lines) + process.communicate(timeout=120)[0]
    assert process.returncode == 143, output
    step = out / "nuts"
    assert (step / "posterior.nc").is_file()  # its partial draws
    (step / "notes.txt").write_text("why I stopped it\n")

    path.write_text(STOPPED.format(draws=50))  # changed: the step starts afresh
    run_workflow(path, output=out, progress=False)
    assert (step / "notes.txt").read_text() == "why I stopped it\n"
    assert _cached(out) == {"data": True, "nuts": False}


def test_a_folder_of_a_stanaccel_without_manifests_keeps_what_its_step_json_does_not_name(tmp_path):
    step = tmp_path / "step"
    (step / "checkpoints").mkdir(parents=True)
    (step / "checkpoints" / "chain-0.pkl").write_bytes(b"draws")
    for name in ("posterior.nc", "notes.txt", STARTED):
        (step / name).write_text(name)
    (step / MARKER).write_text(json.dumps({"key": "old", "outputs": {"posterior.nc": 12}}))
    start(step, "new")
    assert sorted(os.listdir(step)) == [MANIFEST, STARTED, "notes.txt"]


def test_a_note_added_while_a_step_ran_stays_the_users_after_a_kill_a_resume_and_a_change(tmp_path):
    """A step killed outright owns only the files of names its action writes: a note added while it ran
    was taken for its own on the resume, and removed when its settings changed."""
    from stanaccel.workflow.actions import ACTIONS

    step, writes = tmp_path / "hmc", ACTIONS["sample"].writes
    start(step, "key-1", writes=writes)
    (step / "checkpoints" / "chains").mkdir(parents=True)
    (step / "checkpoints" / "chains" / "chain-0.pkl").write_bytes(b"draws")
    (step / ".posterior.nc.123.tmp").write_bytes(b"half written")
    (step / "notes.txt").write_text("my analysis notes\n")  # then SIGKILL
    start(step, "key-1", writes=writes)  # the same settings: resumed
    assert (step / "checkpoints" / "chains" / "chain-0.pkl").is_file()
    (step / "posterior.nc").write_bytes(b"draws")
    assert "notes.txt" not in record_written(step)  # the step completes
    start(step, "key-2", writes=writes)  # changed settings: afresh
    assert sorted(os.listdir(step)) == [MANIFEST, STARTED, "notes.txt"]

    start(step, "key-3", writes=writes)  # killed again, and changed at once
    (step / "posterior.nc").write_bytes(b"part")
    (step / "more notes.md").write_text("and more\n")
    start(step, "key-4", writes=writes)
    assert sorted(os.listdir(step)) == [MANIFEST, STARTED, "more notes.md", "notes.txt"]


def test_output_dot_keeps_the_users_own_workflow_toml(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "workflow.toml"
    mine.write_text("# my own, different workflow\n")
    path = _workflow(tmp_path)
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output=".", progress=False)
    assert str(caught.value) == (
        "workflow.toml in the output folder . was not written by a stanaccel run (there is no run.json of "
        "one beside it), and this run would overwrite it: give the run another output folder (--output, "
        "or output in [workflow]), or move it"
    )
    assert mine.read_text() == "# my own, different workflow\n" and not (tmp_path / "data").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.toml", "workflow.toml"]

    mine.write_text(path.read_text())  # the workflow file itself, run into its own folder
    assert main(["run", "workflow.toml", "-o", ".", "-q"]) == 0, capsys.readouterr().err
    assert mine.read_text() == path.read_text() and _cached(tmp_path) == {"data": False}
    assert main(["run", "w.toml", "-o", ".", "-q"]) == 0  # a run's folder now: its copy is replaced
    assert mine.read_text() == path.read_text()


@pytest.mark.parametrize(
    "mine, said",
    [
        (
            ("run.json", '{"my": "data"}'),
            "out/run.json is not the record of a stanaccel run (it is not a table with the keys workflow, "
            "status, steps), and this run would overwrite it",
        ),
        (("data", "my notes\n"), "step 'data': out/data is a file, where the step's folder goes"),
        (
            ("report.html", "<p>mine</p>\n"),
            "step 'page': out/report.html is not a report that stanaccel wrote",
        ),
    ],
    ids=["run.json", "file-for-a-step-folder", "users-report"],
)
def test_a_file_of_the_users_where_the_run_writes_is_refused_before_any_step(
    tmp_path, monkeypatch, mine, said
):
    monkeypatch.chdir(tmp_path)
    path = _workflow(tmp_path)
    path.write_text(path.read_text() + '\n[[steps]]\nname = "page"\naction = "report"\n')
    (tmp_path / "out" / mine[0]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "out" / mine[0]).write_text(mine[1])
    before = _listing(tmp_path)
    with pytest.raises(ValueError) as caught:
        run_workflow(path, output="out", progress=False)
    assert said in str(caught.value)
    assert _listing(tmp_path) == before  # nothing written, no step run


def test_a_folder_of_the_users_named_as_a_step_is_used_unless_it_holds_what_the_step_writes(tmp_path):
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    (out / "data" / "data.json").write_text("my data\n")
    (out / "data" / "notes.txt").write_text("what this step is for\n")
    with pytest.raises(ValueError) as caught:
        run_workflow(_workflow(tmp_path), output=out, progress=False)
    assert str(caught.value) == (
        f"step 'data': its folder {out / 'data'} was not made by a stanaccel step and holds data.json, which "
        "the step would overwrite: move them, rename the step, or give the run another output folder"
    )
    assert (out / "data" / "data.json").read_text() == "my data\n"
    (out / "data" / "data.json").unlink()
    run_workflow(_workflow(tmp_path), output=out, progress=False)  # notes alone: the step writes beside them
    assert (out / "data" / "notes.txt").read_text() == "what this step is for\n"
    assert (out / "data" / "data.json").is_file()


def test_names_that_differ_only_in_unicode_normalisation_are_one_name(tmp_path):
    composed, decomposed = "caf\u00e9", "cafe\u0301"  # é as one character, and as e and an accent
    path = tmp_path / "w.toml"
    path.write_text(
        WORKFLOW.format(step=decomposed, n=10, workflow="w")
        + WORKFLOW.split("\n\n")[1].format(step=composed, n=10)
    )
    with pytest.raises(ValueError, match=f"two steps are named '{composed}'"):
        load_workflow(path)
    path.write_text(WORKFLOW.format(step=decomposed, n=10, workflow="w"))
    assert [s["name"] for s in load_workflow(path).steps] == [composed]  # its folder: one spelling
    steps = [{"name": decomposed, "action": "generate", "generator": "mvn_mean", "N": 10, "D": 2}]
    with pytest.raises(ValueError, match="it is not in Unicode's NFC form"):
        run_workflow(Workflow(name="python", seed=1, output=tmp_path / "out", steps=steps), progress=False)
