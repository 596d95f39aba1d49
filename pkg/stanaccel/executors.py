"""Where independent pieces of work run: in turn, in threads, in processes, or on a Dask cluster.

One small interface, :class:`Executor` with ``map(fn, items) -> list`` (the
results in the items' order), so that the sampling code runs chains, sampler
runs of a study and grid points of a sweep the same way wherever they run,
and never imports Dask. Four kinds:

- :class:`SerialExecutor`: in turn, in this process (the default: today's
  behaviour, chains still running in threads where each has its own kernel);
- :class:`ThreadExecutor`: threads of this process (Stan releases the GIL);
- :class:`ProcessExecutor`: processes of this machine (``spawn``ed, so each
  rebuilds what it gets from its pickle, as a Dask worker does; Ctrl-C is
  this process's to handle: the workers ignore it and are stopped);
- :class:`DaskExecutor`: a Dask cluster given by its scheduler address, or a
  local cluster of processes (``pip install stanaccel[distributed]``).

Tasks and what they take must pickle: a function of the package (not a
lambda) and its arguments. Stan models pickle by their program and data, and
a worker rebuilds them by loading the program from the compile cache (see
:meth:`stanaccel.stan.CompiledProgram.__reduce__`). An executor that runs
tasks elsewhere has a ``scratch`` folder where tasks write large draws and
return the file's path (:mod:`stanaccel.sampling.tasks`); None keeps them in
the task's result. A Dask executor also ``shares`` an object with its workers
once (:meth:`Executor.share`), so that many small tasks can use it: the parts
of a chain's batch of log densities (:mod:`stanaccel.sampling.batches`).

:func:`executor_from` reads the text form that ``--executor`` and the
workflow key ``[workflow] executor`` take: ``serial``, ``threads[:N]``,
``processes[:N]``, ``dask:local[:N]`` or ``dask:ADDRESS`` (for example
``dask:tcp://10.0.0.5:8786``).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import re
import shutil
import socket
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stanaccel.extras import MissingExtraError
from stanaccel.signals import ignore_stop_signals, stop_signals_ignored

SPECS = "serial, threads[:N], processes[:N], dask:local[:N] or dask:ADDRESS (such as dask:tcp://host:8786)"
DASK_MISSING = (
    "the Dask executor needs dask.distributed, which is not installed: pip install 'stanaccel[distributed]'"
)

MALLOC_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
"""Dask sets ``MALLOC_TRIM_THRESHOLD_`` for its workers, which stops glibc from raising its mmap
threshold: every large temporary of a Stan evaluation on big data is then a fresh mmap, and an
evaluation of the big-data logistic regression (N = 10^5) took 1.4x as long on a worker as in this
process. A local cluster's workers start without it."""


STOP_GRACE = 30.0
"""Seconds the tasks of a stopped :meth:`Executor.map` get to end early and return what they have:
SLURM waits 30 s (its KillWait) between SIGTERM and SIGKILL; ``docker stop`` 10 s."""


class Executor(ABC):
    """Runs ``fn`` on each item; the base of every executor, and a context manager that closes it.

    Attributes
    ----------
    workers : int
        How many tasks run at once (a caller may split work into at least as many pieces).
    scratch : Path or None
        A folder every worker and the caller can read and write: tasks write
        large draws there and return paths. None: results travel whole.
    remote : bool
        Whether tasks run in other processes (their arguments and results are pickled).
    shares : bool
        Whether :meth:`share` sends an object to the workers once (Dask only).
    stop_file : Path or None
        A file whose being there asks this executor's tasks to end early and
        return what they have (a task watches it with :func:`stop_requested`);
        :meth:`map` makes it when a stop signal comes. None: the tasks cannot
        be asked, and a stop cancels them.
    """

    workers: int = 1
    scratch: Path | None = None
    remote: bool = False
    shares: bool = False
    stop_file: Path | None = None

    @abstractmethod
    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], *, keep_on_stop: bool = False) -> list[Any]:
        """``[fn(item) for item in items]``, possibly at the same time; the first error is raised.

        A stop (Ctrl-C, SIGTERM, SIGHUP: ``KeyboardInterrupt`` here) while the
        tasks run cancels them and raises ``KeyboardInterrupt``. With
        ``keep_on_stop``, for tasks that watch :attr:`stop_file`, it is made
        instead and their results (which say they stopped early) are
        returned, if they all end within :data:`STOP_GRACE` seconds.
        """

    def share(self, obj: Any) -> Any:
        """A handle for ``obj``, sent to the workers once, where this executor ``shares``.

        A task of :meth:`map` whose item holds the handle (such as a tuple
        ``(handle, points)``) gets ``obj`` in its place, without ``obj``
        travelling with every task. Only Dask can: it scatters ``obj`` to
        every worker, which keeps it while the handle lives. The others share
        nothing (processes of this machine add no core that this process's
        own threads do not already use).

        Raises
        ------
        TypeError
            This executor does not share (``shares`` is False): check ``shares`` first.
        """
        raise TypeError(f"{self!r} shares nothing with its workers (only a Dask executor does)")

    def close(self) -> None:  # noqa: B027 (nothing to release by default)
        """Release workers, clusters and the scratch folder this executor made."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workers={self.workers})"


class SerialExecutor(Executor):
    """Each item in turn, in this process (a stop raises in the task itself, which may keep what it has)."""

    def map(self, fn, items, *, keep_on_stop=False):
        return [fn(item) for item in items]


class _PoolExecutor(Executor):
    """An executor over a ``concurrent.futures`` pool, started on first use."""

    def __init__(self, workers: int | None = None):
        if workers is not None and workers < 1:
            raise ValueError(f"{type(self).__name__}: workers must be at least 1, not {workers}")
        self.workers = workers or os.cpu_count() or 1
        self._pool = None

    @abstractmethod
    def _make_pool(self):
        """The ``concurrent.futures`` pool to run on."""

    def map(self, fn, items, *, keep_on_stop=False):
        if self._pool is None:
            self._pool = self._make_pool()
        with self._starting():
            futures = [self._pool.submit(fn, item) for item in items]

        def running() -> bool:
            failed = any(f.done() and f.exception() is not None for f in futures)
            return not failed and not all(f.done() for f in futures)

        try:
            _until(running)  # waiting a short while at a time, so that a stop signal raises here
        except KeyboardInterrupt:
            if not (keep_on_stop and _ask_to_stop(self.stop_file, lambda: _until(running, STOP_GRACE))):
                for future in futures:
                    future.cancel()
                self._abandon()
                raise
        return [future.result() for future in futures]

    def _starting(self) -> contextlib.AbstractContextManager[None]:
        """What holds while tasks are submitted (and a pool may start its workers)."""
        return contextlib.nullcontext()

    def _abandon(self) -> None:
        """After a stop: end what still runs, where this executor can (threads run on to their end)."""

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class ThreadExecutor(_PoolExecutor):
    """Threads of this process: pays off where the work releases the GIL (Stan's evaluations do)."""

    def __init__(self, workers: int | None = None):
        super().__init__(workers)
        self._stop_folder = tempfile.mkdtemp(prefix="stanaccel-stop-")
        self.stop_file = Path(self._stop_folder) / STOP_NAME

    def _make_pool(self):
        return ThreadPoolExecutor(self.workers, thread_name_prefix="stanaccel")

    def close(self) -> None:
        super().close()
        shutil.rmtree(self._stop_folder, ignore_errors=True)


class ProcessExecutor(_PoolExecutor):
    """Processes of this machine, started by ``spawn`` (no forked threads); draws go through a temp folder.

    Ctrl-C, SIGTERM and SIGHUP are this process's alone: a terminal (or
    ``timeout``, or SLURM) sends them to the workers too, which would each
    print a traceback from wherever they are (importing, unpickling,
    sampling) or die, so they start ignoring them
    (:func:`stanaccel.signals.ignore_stop_signals`). A stop while :meth:`map`
    waits ends the workers (their tasks' results are lost) and raises
    ``KeyboardInterrupt`` here, once.
    """

    remote = True

    def __init__(self, workers: int | None = None):
        super().__init__(workers)
        self._scratch = tempfile.mkdtemp(prefix="stanaccel-scratch-")
        self.scratch = Path(self._scratch)
        self.stop_file = self.scratch / STOP_NAME

    def _make_pool(self):
        return ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_stop_signals
        )

    def _starting(self):
        return stop_signals_ignored()  # the pool starts its processes as tasks are submitted

    def _abandon(self) -> None:
        self._stop_workers()

    def _stop_workers(self) -> None:
        """End the worker processes now (they ignore the stop signals: SIGKILL), dropping their tasks."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        kill = getattr(pool, "kill_workers", None)  # Python 3.14
        if kill is not None:
            kill()
        else:
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        super().close()
        shutil.rmtree(self._scratch, ignore_errors=True)


class DaskExecutor(Executor):
    """Tasks on a Dask cluster: the scheduler at ``address``, or a new local cluster of processes.

    Parameters
    ----------
    address : str, optional
        A running scheduler (``tcp://host:8786``, or the ``scheduler_address``
        of a ``dask_jobqueue.SLURMCluster``). None starts a ``LocalCluster``
        of ``n_workers`` processes, one thread each, closed by :meth:`close`.
    n_workers : int, optional
        Workers of the local cluster (default: the CPU count).
    scratch : str or Path, optional
        A folder that the workers and this process share (a network file
        system on a cluster): tasks write large draws there and return
        paths. Default: a temp folder for a local cluster; none for a
        remote one (results then travel through the scheduler).

    Raises
    ------
    MissingExtraError
        dask.distributed is not installed (``pip install stanaccel[distributed]``).
    """

    remote = True
    shares = True

    def __init__(self, address: str | None = None, n_workers: int | None = None, scratch=None):
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            raise MissingExtraError(DASK_MISSING) from exc
        self.address = address
        self._cluster = None
        self._scratch = None
        if address is None:
            n_workers = n_workers or os.cpu_count() or 1
            # the workers started later, by scale: their nannies read the setting as they are made
            with dask.config.set({MALLOC_TRIM: None}):  # None: the workers' environment lacks it
                self._cluster = LocalCluster(
                    n_workers=0, threads_per_worker=1, processes=True, dashboard_address=None
                )
                try:
                    _start_workers(self._cluster, n_workers)
                except BaseException:  # a stop (or a failed start) while they start: end what started
                    self._cluster.close()
                    raise
            self.client = Client(self._cluster)
            if scratch is None:
                self._scratch = tempfile.mkdtemp(prefix="stanaccel-scratch-")
                scratch = self._scratch
        else:
            check_reachable(f"dask:{address}")
            self.client = Client(address)
        self.scratch = Path(scratch) if scratch is not None else None
        self.stop_file = None if self.scratch is None else self.scratch / STOP_NAME
        self.workers = max(1, sum(self.client.nthreads().values()))

    def map(self, fn, items, *, keep_on_stop=False):
        items = list(items)
        if not items:
            return []
        # pure=False: equal items (such as two identical chains) are still separate tasks
        futures = self.client.map(fn, items, pure=False)

        def running() -> bool:
            return not all(f.done() for f in futures) and not any(f.status == "error" for f in futures)

        try:
            # Waiting here, not inside gather: a stop signal then raises in this loop, and the tasks
            # are cancelled, instead of leaving Dask's own waits to print a traceback each.
            _until(running)
        except KeyboardInterrupt:
            if not (keep_on_stop and _ask_to_stop(self.stop_file, lambda: _until(running, STOP_GRACE))):
                self.client.cancel(futures)
                raise
        return self.client.gather(futures)  # the results, or the first task's error

    def share(self, obj):
        # in a list: a dict or list alone would be scattered item by item
        return self.client.scatter([obj], broadcast=True, hash=False)[0]

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __repr__(self) -> str:
        where = self.address or "local cluster"
        return f"DaskExecutor({where}, workers={self.workers})"


WORKERS_START = 120.0
"""Seconds a local Dask cluster's worker processes get to start and connect (a few, on an idle machine)."""


def _start_workers(cluster, n_workers: int) -> None:
    """Start the local ``cluster``'s ``n_workers`` worker processes ignoring the stop signals.

    A signal sent to the process group (Ctrl-C in a terminal, ``timeout``,
    SLURM) reaches Dask's workers too, which take Python's defaults: SIGTERM
    and SIGHUP kill them, their chains' draws with them, and Ctrl-C prints a
    traceback in each. Dask installs no handler of its own in them (and its
    nanny runs in this process), so they start ignoring the stop signals as
    the processes executor's do (a process inherits an ignored signal), and
    this process stops their chains through the stop file. This process
    ignores them only until the worker processes exist (a tenth of a second,
    not the seconds they take to connect), since a signal then is lost.
    """
    before = set(multiprocessing.active_children())

    def starting() -> bool:
        return len(set(multiprocessing.active_children()) - before) < n_workers

    with stop_signals_ignored():
        cluster.scale(n_workers)  # their nannies, in this process's Dask thread, start them
        _until(starting, WORKERS_START)
    cluster.wait_for_workers(n_workers, timeout=WORKERS_START)


STOP_NAME = "stop"
"""The name of an executor's :attr:`~Executor.stop_file` in its scratch (or own temporary) folder."""


def stop_requested(stop_file: str | Path | None, every: float = 0.25) -> Callable[..., bool]:
    """For a task: a function that says whether its executor asked it to stop (its stop file is there).

    It looks at the file at most every ``every`` seconds, so a chain may
    call it at every draw. Any arguments are ignored (``run_chains``'s
    ``stop`` passes the chain and the draw).
    """
    if stop_file is None:
        return lambda *args: False
    path, last = Path(stop_file), [0.0]

    def asked(*args) -> bool:
        now = time.monotonic()
        if now - last[0] < every:
            return False
        last[0] = now
        return path.exists()

    return asked


def _ask_to_stop(stop_file: Path | None, wait_for_them: Callable[[], bool]) -> bool:
    """Make ``stop_file``, wait for the tasks to end (``wait_for_them``: whether some still run), remove it.

    Returns whether they all ended; False where there is no stop file.
    """
    if stop_file is None:
        return False
    stop_file.touch()
    try:
        return not wait_for_them()
    finally:
        stop_file.unlink(missing_ok=True)


def _until(running: Callable[[], bool], seconds: float = math.inf) -> bool:
    """Poll ``running`` until it is False or ``seconds`` passed; whether it still runs."""
    deadline = time.monotonic() + seconds
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    return running()


def executor_from(spec: str | Executor | None) -> Executor:
    """The executor a text names (see the module docstring); an Executor as it is; None: serial.

    Raises
    ------
    ValueError
        The text names no executor, or its worker count is not a positive integer.
    MissingExtraError
        A Dask executor without dask.distributed installed (an ImportError).
    """
    if spec is None:
        return SerialExecutor()
    if isinstance(spec, Executor):
        return spec
    kind, workers = check_spec(spec)
    if kind == "serial":
        return SerialExecutor()
    if kind == "threads":
        return ThreadExecutor(workers)
    if kind == "processes":
        return ProcessExecutor(workers)
    if kind == "dask:local":
        return DaskExecutor(n_workers=workers)
    return DaskExecutor(address=kind.removeprefix("dask:"))


def check_spec(spec: str) -> tuple[str, int | None]:
    """Check an executor text without starting anything; return its kind and worker count.

    The kind is ``serial``, ``threads``, ``processes``, ``dask:local`` or
    ``dask:ADDRESS``; an address has a scheme (``tcp://host:8786``) or a port
    (``host:8786``). Workflow files are checked with it before they run.
    """
    text = str(spec).strip()
    kind, _, rest = text.partition(":")
    if kind == "serial" and not rest:
        return "serial", None
    if kind in ("threads", "processes"):
        return kind, _count(rest, text) if rest else None
    if kind == "dask" and (rest == "local" or rest.startswith("local:")):
        count = rest.partition(":")[2]
        return "dask:local", _count(count, text) if count else None
    if kind == "dask" and ("://" in rest or re.fullmatch(r"[\w.\-]+:\d+", rest)):
        return text, None
    raise ValueError(f"executor {text!r}: expected {SPECS}")


def _count(text: str, spec: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"executor {spec!r}: the number of workers must be a positive integer, not {text!r}")
    return int(text)


def check_reachable(spec: str, timeout: float = 3.0) -> None:
    """Raise ValueError, fast, if ``spec`` is ``dask:ADDRESS`` and nothing listens at the address.

    A Dask client waits 30 s for an absent scheduler and then says only that it
    timed out; this opens one TCP connection (at most ``timeout`` seconds) to
    say so at once, before any expensive work. Other executors, and addresses
    of a scheme other than tcp, are not checked.
    """
    kind, _ = check_spec(spec)
    address = kind.removeprefix("dask:")
    if not kind.startswith("dask:") or kind == "dask:local":
        return
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise ValueError(
            f"executor {spec!r}: no Dask scheduler answers at {host}:{port} ({reason}); start one there "
            "(`dask scheduler`), check the address and port, or use dask:local:N for a local cluster"
        ) from None
