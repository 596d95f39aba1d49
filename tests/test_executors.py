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


@pytest.mark.slow
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
    [
        ("hmc", {"n_steps": 5}),
        ("pt", {"inner": "mh", "levels": 3, "schedule_rounds": 4}),
        ("spt", {"levels": 3, "schedule_rounds": 4}),
    ],
)
@pytest.mark.slow
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


@pytest.mark.slow
def test_chains_in_processes_and_threads_draw_what_a_local_run_draws(mvn_program, mvn_data):
    # The ladder given: placing one (6 of the run's 10 s) runs in this process whatever the executor.
    settings = {**SETTINGS, "chains": 2, "betas": [1, 0.6, 0.3, 0.1, 0]}
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


@pytest.mark.slow
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
schedule_rounds = 4
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
schedule_rounds = 4
"""

TIMED = ("seconds", "per_second", "wall", "cost_vs_inner", "warmup", "vs_nuts")  # columns that measure time


@pytest.mark.slow
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


def _parts_computed(dask_executor) -> int:
    """How many parts of batches (``evaluate_part`` tasks) the cluster's workers have computed."""

    def count(dask_scheduler):
        prefix = dask_scheduler.task_prefixes.get("evaluate_part")
        return 0 if prefix is None else prefix.state_counts["memory"]

    return dask_executor.client.run_on_scheduler(count)


def test_imh_batches_across_dask_workers_draw_what_a_local_run_draws(dask_executor, mvn_program, mvn_data):
    settings = {**SETTINGS, "chains": 2, "batch": 8}
    local = sample(mvn_program, mvn_data, "imh", settings, seed=3, progress=False)
    before = _parts_computed(dask_executor)
    spread = sample(mvn_program, mvn_data, "imh", settings, seed=3, progress=False, executor=dask_executor)
    batches = -(-SETTINGS["draws"] // settings["batch"])  # per chain, the last partly used
    assert _parts_computed(dask_executor) - before == 2 * batches * dask_executor.workers
    np.testing.assert_array_equal(spread.run.positions, local.run.positions)
    np.testing.assert_array_equal(spread.draws(), local.draws())
    np.testing.assert_array_equal(spread.run.evaluations, local.run.evaluations)
    assert spread.run.evaluations.tolist() == [1 + batches * settings["batch"]] * 2  # the start, the batches
    costs = [d["exact"]["evaluations"] for d in spread.reports["density_costs"]]
    assert costs == [d["exact"]["evaluations"] for d in local.reports["density_costs"]]
    assert all(d["exact"]["seconds"] > 0 for d in spread.reports["density_costs"])  # the workers' seconds
    assert spread.reports["summaries"] == local.reports["summaries"]


def _fails_above_one(x: np.ndarray) -> float:
    if x[0] > 1:
        raise ValueError(f"a defect at {x[0]}")
    return -0.5 * float(x @ x)


@pytest.mark.slow
def test_batch_parts_on_workers_are_rejected_where_undefined_and_counted(dask_executor, reject_program):
    from stanaccel.approx import KeepConstants
    from stanaccel.densities import FunctionDensity, safe_log_densities
    from stanaccel.sampling.batches import ExecutorBatches

    batches = ExecutorBatches(dask_executor)
    points = np.array([[0.5], [4.0], [-1.0], [3.5], [1.0]])  # the model rejects above 3
    density, here = KeepConstants(StanModel(reject_program)), KeepConstants(StanModel(reject_program))
    values = batches(density, points)
    np.testing.assert_array_equal(values, safe_log_densities(here, points))
    assert values[1] == values[3] == -np.inf and np.all(np.isfinite(values[[0, 2, 4]]))
    assert density.n_log_density == 5 and density.seconds > 0
    defective = FunctionDensity(1, _fails_above_one)
    with pytest.raises(ValueError, match="a defect at 2.0"):
        batches(defective, np.array([[0.0], [2.0], [0.5]]))
    assert batches.lost is None  # a defect of the density, raised here; not a failure of the cluster
    batches.release()


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")  # the module's cluster has it
@pytest.mark.slow
def test_batches_are_evaluated_here_once_the_workers_are_lost(mvn_model):
    import os

    from stanaccel.densities import safe_log_densities
    from stanaccel.sampling.batches import ExecutorBatches

    points = np.random.default_rng(0).normal(size=(6, mvn_model.dim))
    expected = safe_log_densities(mvn_model, points)
    density = mvn_model.with_data(mvn_model.data_json)
    with DaskExecutor(n_workers=1) as executor:  # its own cluster: this test kills its workers
        batches = ExecutorBatches(executor)
        np.testing.assert_array_equal(batches(density, points), expected)
        with pytest.raises(Exception):  # noqa: B017 (the workers die before they answer)
            executor.client.run(os._exit, 1)  # every worker, and the density they were given, is lost
        with pytest.warns(RuntimeWarning, match="evaluated here from now on"):
            np.testing.assert_array_equal(batches(density, points), expected)
        assert batches.lost is not None
        np.testing.assert_array_equal(batches(density, points), expected)
    assert density.n_log_density == 3 * len(points)


def test_a_local_clusters_workers_keep_glibcs_own_mmap_threshold(dask_executor):
    import os

    # Dask's MALLOC_TRIM_THRESHOLD_ made each Stan evaluation on big data a fresh mmap (1.4x slower)
    values = dask_executor.client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_")
    assert len(values) == 2 and set(values.values()) == {None}


def test_a_local_clusters_workers_ignore_the_stop_signals(dask_executor):
    import signal

    from stanaccel.signals import STOP_SIGNALS

    def ignores(signum: int) -> bool:  # local: sent whole, the workers need not import this module
        return signal.getsignal(signum) is signal.SIG_IGN

    # A terminal's Ctrl-C, timeout's or SLURM's SIGTERM reach the whole process group: the workers leave
    # them to this process, which stops their chains through the stop file and keeps their draws.
    for signum in STOP_SIGNALS:
        assert list(dask_executor.client.run(ignores, signum).values()) == [True, True], signum


@pytest.mark.filterwarnings("ignore:Port 8787 is already in use")  # the module's cluster has it
@pytest.mark.slow
def test_a_stopped_chain_whose_worker_died_is_said_to_be_lost(mvn_program, mvn_data):
    import _thread
    import os
    import threading

    settings = {"chains": 1, "warmup": 50, "draws": 10**8}
    with DaskExecutor(n_workers=1) as executor:  # its own cluster: this test kills its worker

        def kill_then_stop():
            while not list(executor.scratch.glob("began-*")):  # the chain has begun
                threading.Event().wait(0.05)
            with pytest.raises(Exception):  # noqa: B017 (the worker dies before it answers)
                executor.client.run(os._exit, 1)
            _thread.interrupt_main()  # the stop comes before Dask runs the chain again on a new worker

        killer = threading.Thread(target=kill_then_stop, daemon=True)
        killer.start()
        with pytest.raises(KeyboardInterrupt) as stopped:
            sample(mvn_program, mvn_data, "mh", settings, seed=1, progress=False, executor=executor)
        killer.join()
    assert (
        str(stopped.value)
        == "the worker process of chain 0 died (killed, or out of memory), its draws with it"
    )
