"""Executors: the same draws in turn, in processes and on a real Dask cluster of processes.

One ``LocalCluster`` of two worker processes (one thread each) serves the
module; its workers rebuild the Stan models from the compile cache this
machine's tests share (the same ``HOME``), so nothing compiles here.
"""

import json
import pickle

import numpy as np
import pytest

from stanaccel.executors import (
    DaskExecutor,
    ProcessExecutor,
    SerialExecutor,
    ThreadExecutor,
    check_spec,
    executor_from,
)
from stanaccel.kernels import run_chains
from stanaccel.sampling import sample
from stanaccel.stan import StanModel

pytest.importorskip("dask.distributed")

SETTINGS = {"chains": 3, "warmup": 150, "draws": 60}


@pytest.fixture(scope="module")
def dask_executor():
    with DaskExecutor(n_workers=2) as executor:
        yield executor


def square(x):
    return x * x


def test_every_executor_maps_in_order(dask_executor):
    for executor in (SerialExecutor(), ThreadExecutor(2), dask_executor):
        assert executor.map(square, range(7)) == [x * x for x in range(7)]
    assert dask_executor.workers == 2


def test_executor_specs():
    assert isinstance(executor_from(None), SerialExecutor)
    assert isinstance(executor_from("serial"), SerialExecutor)
    with executor_from("threads:3") as threads:
        assert isinstance(threads, ThreadExecutor) and threads.workers == 3
    with executor_from("processes:2") as processes:
        assert isinstance(processes, ProcessExecutor) and processes.workers == 2
    for good, kind in [
        ("dask:local", ("dask:local", None)),
        ("dask:local:4", ("dask:local", 4)),
        ("dask:tcp://10.0.0.5:8786", ("dask:tcp://10.0.0.5:8786", None)),
        ("dask:node-3.cluster:8786", ("dask:node-3.cluster:8786", None)),
    ]:
        assert check_spec(good) == kind  # checked without starting a cluster
    for bad, message in [
        ("dask", "expected serial"),
        ("thread", "expected serial"),
        ("threads:0", "positive integer"),
        ("processes:two", "positive integer"),
        ("dask:local:-1", "positive integer"),
        ("dask:locl", "expected serial"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_spec(bad)
        with pytest.raises(ValueError, match=message):
            executor_from(bad)


def test_stan_model_pickles_by_program_and_data(mvn_model):
    point = np.full(mvn_model.dim, 0.3)
    mvn_model.log_density(point)
    copy = pickle.loads(pickle.dumps(mvn_model))
    assert copy is not mvn_model and copy.program.module is mvn_model.program.module  # loaded once
    assert copy.n_log_density == mvn_model.n_log_density  # the counts travel with it
    assert copy.log_density(point) == mvn_model.log_density(point)


def test_one_chain_alone_draws_what_it_draws_in_the_whole_run(mvn_model):
    from stanaccel.kernels import HMC

    make = lambda chain: HMC(mvn_model.with_data(mvn_model.data_json), 0.2, 5)  # noqa: E731
    starts = np.zeros((3, mvn_model.dim))
    whole = run_chains(make, starts, 40, seed=11)
    sequences = np.random.SeedSequence(11).spawn(3)
    alone = run_chains(make, starts[2:], 40, chain_seeds=[sequences[2]])
    np.testing.assert_array_equal(alone.positions[0], whole.positions[2])
    with pytest.raises(ValueError, match="2 chain seeds for 3 chains"):
        run_chains(make, starts, 5, chain_seeds=sequences[:2])


@pytest.mark.parametrize(
    ("method", "settings"),
    [("hmc", {"n_steps": 5}), ("pt", {"inner": "mh", "levels": 3}), ("spt", {"levels": 3})],
)
def test_chains_on_dask_draw_what_a_local_run_draws(dask_executor, mvn_program, mvn_data, method, settings):
    local = sample(mvn_program, mvn_data, method, {**SETTINGS, **settings}, seed=5, progress=False)
    remote = sample(
        mvn_program,
        mvn_data,
        method,
        {**SETTINGS, **settings},
        seed=5,
        progress=False,
        executor=dask_executor,
    )
    np.testing.assert_array_equal(remote.run.positions, local.run.positions)
    np.testing.assert_array_equal(remote.draws(), local.draws())
    np.testing.assert_array_equal(remote.run.evaluations, local.run.evaluations)
    for ours, theirs in zip(remote.run.summaries, local.run.summaries, strict=True):
        assert (ours is None) == (theirs is None)
        for key in ours or {}:
            np.testing.assert_array_equal(ours[key], theirs[key])
    assert len(remote.reports["density_costs"]) == SETTINGS["chains"]
    assert not list(dask_executor.scratch.iterdir())  # the spilled draws were read back and removed


def test_chains_in_processes_and_threads_draw_what_a_local_run_draws(mvn_program, mvn_data):
    settings = {**SETTINGS, "chains": 2}
    local = sample(mvn_program, mvn_data, "tt", settings, seed=2, progress=False)
    for executor in ("processes:2", "threads:2"):
        remote = sample(mvn_program, mvn_data, "tt", settings, seed=2, progress=False, executor=executor)
        np.testing.assert_array_equal(remote.run.positions, local.run.positions)
        assert len(remote.reports["density_costs"]) == 2


def test_missing_dask_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.startswith("dask"):
            raise ImportError("No module named 'dask'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ImportError, match=r"pip install 'stanaccel\[distributed\]'"):
        executor_from("dask:local:1")


def test_a_stan_model_rebuilt_on_a_worker(dask_executor, mvn_model):
    point = np.full(mvn_model.dim, -0.2)
    values = dask_executor.map(_log_density_at, [(mvn_model, point)] * 2)
    assert values == [mvn_model.log_density(point)] * 2


def _log_density_at(item: tuple[StanModel, np.ndarray]) -> float:
    model, point = item
    return model.log_density(point)


WORKFLOW = """
[workflow]
name = "scaled"
seed = 4
executor = "{executor}"

[[steps]]
name = "data"
action = "generate"
generator = "mvn_mean"
N = 12
D = 2

[[steps]]
name = "stt"
action = "sample"
data = "data"
method = "stt"
levels = 3
chains = 2
warmup = 100
draws = 50

[[steps]]
name = "study"
action = "tempering_study"
program = "mvn_mean"
sizes = [{{ N = 10, D = 2 }}, {{ N = 20, D = 2 }}]
samplers = ["hmc", "pt", "stt"]
inner = ["hmc"]
chains = 2
draws = 50
nuts_warmup = 100
tune_from_nuts = true
start = "nuts_warmup"
levels = 3
"""

TIMED = ("seconds", "per_second", "wall", "cost_vs_inner", "warmup", "vs_nuts")  # columns that measure time


def test_a_workflow_on_dask_gives_the_serial_numbers(dask_executor, mvn_program, tmp_path):
    from stanaccel.workflow import run_workflow

    path = tmp_path / "w.toml"
    path.write_text(WORKFLOW.format(executor="serial"))
    serial = run_workflow(path, output=tmp_path / "serial", progress=False)
    on_dask = run_workflow(path, output=tmp_path / "dask", progress=False, executor=dask_executor)
    np.testing.assert_array_equal(
        on_dask.results["stt"]["result"].draws(), serial.results["stt"]["result"].draws()
    )
    ours, theirs = on_dask.results["study"]["rows"], serial.results["study"]["rows"]
    assert [r["sampler"] for r in ours] == [r["sampler"] for r in theirs] and len(ours) == 8
    for row, expected in zip(ours, theirs, strict=True):
        for key, value in expected.items():
            if not any(word in key for word in TIMED):
                assert row[key] == value or (value != value and row[key] != row[key]), (row["sampler"], key)
    assert "DaskExecutor" in json.loads((tmp_path / "dask" / "run.json").read_text())["executor"]


def test_a_workflow_names_a_bad_executor(tmp_path):
    from stanaccel.workflow.runner import load_workflow

    path = tmp_path / "w.toml"
    path.write_text(WORKFLOW.format(executor="threads:zero"))
    with pytest.raises(
        ValueError, match=r"w.toml: \[workflow\] executor 'threads:zero': the number of workers must be"
    ):
        load_workflow(path)


def test_the_command_line_names_a_bad_executor(tmp_path, capsys):
    from stanaccel.cli import main

    path = tmp_path / "w.toml"
    path.write_text(WORKFLOW.format(executor="serial"))
    assert main(["run", str(path), "--executor", "dask", "-o", str(tmp_path / "out")]) == 2
    assert "executor 'dask': expected serial, threads[:N]" in capsys.readouterr().err
    code = main(
        ["sample", "mvn_mean", "--method", "hmc", "--executor", "processes:0", "-o", str(tmp_path / "x.nc")]
    )
    assert code == 2
    assert "number of workers must be a positive integer" in capsys.readouterr().err


def test_an_unreachable_dask_scheduler_is_named_before_the_warmup(tmp_path, capsys):
    # port 1 on this machine: closed, so the connection is refused at once
    from stanaccel.cli import main

    code = main(
        [
            "sample",
            "mvn_mean",
            "--method",
            "mh",
            "--executor",
            "dask:tcp://127.0.0.1:1",
            "-o",
            str(tmp_path / "x.nc"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no Dask scheduler answers at 127.0.0.1:1" in err and "warm-up" not in err
    with pytest.raises(ValueError, match="no Dask scheduler answers at 127.0.0.1:1"):
        DaskExecutor("tcp://127.0.0.1:1")  # the workflow's route: without the check, a 30 s timeout
