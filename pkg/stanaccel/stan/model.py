"""One live instance of a compiled Stan program with its data.

:class:`StanModel` mirrors ``bridgestan.StanModel``: the same method names,
keyword-only flags and meanings (``theta`` constrained, ``theta_unc``
unconstrained), so code written for one runs with the other. It is also a
log density in stanaccel's sense (``dim``, ``log_density``,
``log_density_gradient``) that counts its evaluations.
"""

from __future__ import annotations

import hashlib
import math
import os
import reprlib
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.densities import COUNTING
from stanaccel.seeds import check_seed
from stanaccel.stan.compiler import CompiledProgram, compile_program
from stanaccel.stan.data import StanData, data_digest, data_error, data_to_json
from stanaccel.stan.errors import StanDataError

Variables = list[tuple[str, tuple[int, ...]]]


class StanModel:
    """A Stan program compiled once, instantiated with data, evaluated fast.

    Parameters
    ----------
    program : str, Path or CompiledProgram
        A ``.stan`` file, the program text, or an already compiled program.
    data : dict, str, Path or None
        Data as a dict of NumPy arrays and scalars, a Stan JSON file, or
        JSON text; None for a program without data.
    seed : int
        Seed for the RNG of the ``transformed data`` block, in [0, 2**32).

    Raises
    ------
    TypeError
        ``data`` is none of the above (a list, a number).
    ValueError
        ``seed`` is not an integer in [0, 2**32).
    StanCompileError, StanBuildError
        The program does not compile or build (see :func:`compile_program`).
    StanDataError
        The data do not fit the program; Stan's message names the variable.

    Notes
    -----
    ``log_density`` and ``log_density_gradient`` release the GIL while Stan
    evaluates, so chains can run in threads, unless the instance's last
    evaluation took under 10 microseconds: handing the GIL over costs more
    than such an evaluation, and with chains in threads the hand-offs queue
    (four chains of a 1-microsecond gradient ran 2.4 times slower than in
    turn); ``releases_gil`` says which the next one does. One instance may
    be evaluated from several threads at once (``thread_safe``: Stan's model is read-only
    and each thread has its own autodiff tape; the counters are updated
    under a lock), as a batch of proposals is. Where the density is undefined
    (Stan ``domain_error`` or ``reject``) they raise
    :class:`~stanaccel.stan.errors.StanDomainError`, which samplers count as
    a rejected proposal; other Stan exceptions raise
    :class:`~stanaccel.stan.errors.StanEvaluationError`.

    Instances of one program on the same data and seed share one Stan
    instance (:func:`_stan_instance`): on big data, converting the data to
    JSON text and Stan's reading it are seconds each (about 30 s at 10^7
    numbers), and every chain asks for its own instance; each keeps its own
    evaluation counts.
    """

    thread_safe = True
    """One instance may be evaluated from several threads at once (see the notes)."""

    def __init__(self, program: str | Path | CompiledProgram, data: StanData = None, *, seed: int = 0):
        check_data_argument(data)
        seed = check_seed(seed, "seed", below=2**32)  # Stan's RNG takes an unsigned 32-bit seed
        self.program = program if isinstance(program, CompiledProgram) else compile_program(program)
        self.seed = seed
        self._model, self.data_json = _stan_instance(self.program, data, seed)
        self._dim = self._model.param_unc_num()
        self.n_log_density = 0
        self.n_gradient = 0

    def __reduce__(self):
        """Pickle by program, data and seed (the Stan instance itself does not pickle).

        Another process rebuilds the instance from its program (loaded from
        the compile cache, see :meth:`CompiledProgram.__reduce__`) and data;
        the evaluation counters travel with it.
        """
        return _rebuild, (self.program, self.data_json, self.seed, self.n_log_density, self.n_gradient)

    def with_data(self, data: StanData, *, seed: int | None = None) -> StanModel:
        """A new instance of the same compiled program with other data (no recompile)."""
        return StanModel(self.program, data, seed=self.seed if seed is None else seed)

    def __repr__(self) -> str:
        return f"StanModel({self.name!r}, dim={self._dim})"

    # ---- names and sizes -------------------------------------------------

    @property
    def name(self) -> str:
        """The model's name, from its program."""
        return self._model.name()

    @property
    def dim(self) -> int:
        """Number of unconstrained parameters (the sampling space)."""
        return self._dim

    @property
    def releases_gil(self) -> bool:
        """Whether the next evaluation releases the GIL: the last one took 10 microseconds or more."""
        return self._model.releases_gil()

    def model_info(self) -> str:
        """Program name, library path and stanc warnings."""
        return f"{self.program.name} at {self.program.library}\n{self.program.warnings}".strip()

    def param_num(self, *, include_tp: bool = False, include_gq: bool = False) -> int:
        """Number of constrained parameters (scalars), optionally with TP and GQ."""
        return self._model.param_num(include_tp, include_gq)

    def param_unc_num(self) -> int:
        """Number of unconstrained parameters."""
        return self._dim

    def param_names(self, *, include_tp: bool = False, include_gq: bool = False) -> list[str]:
        """Flat names of constrained parameters, e.g. ``theta.1`` (column-major)."""
        return self._model.param_names(include_tp, include_gq)

    def param_unc_names(self) -> list[str]:
        """Flat names of unconstrained parameters."""
        return self._model.param_unc_names()

    def variables(self, *, include_tp: bool = False, include_gq: bool = False) -> Variables:
        """(name, dims) of each parameter-block variable, in declaration order."""
        return [(name, tuple(dims)) for name, dims in self._model.variables(include_tp, include_gq)]

    # ---- transforms ------------------------------------------------------

    def param_constrain(
        self, theta_unc: np.ndarray, *, include_tp: bool = False, include_gq: bool = False, seed: int = 0
    ) -> np.ndarray:
        """Map an unconstrained point to the flat constrained parameters.

        ``seed`` drives the RNG of generated quantities when ``include_gq``.
        """
        try:
            return self._model.param_constrain(theta_unc, include_tp, include_gq, seed)
        except TypeError:
            raise _point_error(theta_unc, self._dim) from None

    def param_unconstrain(self, theta: np.ndarray) -> np.ndarray:
        """Map flat constrained parameters (as ``param_constrain`` gives) to unconstrained."""
        try:
            return self._model.param_unconstrain(np.ravel(theta))
        except TypeError:
            raise _point_error(theta, self.param_num(), "constrained") from None

    def log_scale_coordinates(self) -> np.ndarray:
        """Which unconstrained coordinates are the log of a bounded scale: ``real<lower=a>`` (or ``upper``).

        Stan maps such a parameter as a + exp(x) (or b - exp(x)): moving x by
        1 and by 2 changes it by factors e apart. A coordinate is one when it
        moves exactly one constrained value, that way (a ``tau`` of a
        hierarchical model; not a simplex's or a correlation matrix's).
        """
        origin = self.param_constrain(np.zeros(self._dim))
        out = np.zeros(self._dim, dtype=bool)
        for j in range(self._dim):
            steps = [self.param_constrain(_unit(self._dim, j, k)) - origin for k in (1.0, 2.0)]
            moved = np.flatnonzero(np.abs(steps[1]) > 1e-12 * (1 + np.abs(origin)))
            if len(moved) == 1:
                first, second = steps[0][moved[0]], steps[1][moved[0]]
                out[j] = abs(second / first - (np.e + 1)) < 1e-6  # (e^2 - 1) / (e - 1) = e + 1
        return out

    def unflatten(self, flat: np.ndarray, *, include_tp: bool = False, include_gq: bool = False) -> dict:
        """Split flat constrained values (last axis) into named arrays of their Stan shape."""
        return unflatten(flat, self.variables(include_tp=include_tp, include_gq=include_gq))

    # ---- density ---------------------------------------------------------

    def log_density(self, theta_unc: np.ndarray, *, propto: bool = True, jacobian: bool = True) -> float:
        """Log density at an unconstrained point.

        ``propto`` drops constant terms; ``jacobian`` adds the log Jacobian of
        the constraining transform (needed to sample on the unconstrained space).
        """
        with COUNTING:
            self.n_log_density += 1
        try:
            return self._model.log_density(theta_unc, propto, jacobian)
        except TypeError:
            raise _point_error(theta_unc, self._dim) from None

    def log_density_gradient(
        self,
        theta_unc: np.ndarray,
        *,
        propto: bool = True,
        jacobian: bool = True,
        out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Log density and its gradient at an unconstrained point.

        ``out`` (a writeable, C-contiguous float64 array of shape ``(dim,)``)
        receives the gradient if given; it is reused, so a caller that keeps a
        gradient must copy it.

        Raises
        ------
        ValueError
            ``out`` is not such an array. Any other buffer would be converted
            to a temporary copy on the way into C++, and the gradient written
            there would never reach ``out``.
        """
        if out is None:
            out = np.empty(self._dim)
        else:
            check_gradient_buffer(out, self._dim)
        with COUNTING:
            self.n_gradient += 1
        try:
            return self._model.log_density_gradient(theta_unc, propto, jacobian, out), out
        except TypeError:
            raise _point_error(theta_unc, self._dim) from None

    def time_log_density_gradient(self, theta_unc: np.ndarray, repeats: int = 1000) -> float:
        """Mean seconds per gradient evaluation timed inside C++ (no Python)."""
        return self._model.time_log_density_gradient(theta_unc, repeats)


def check_data_argument(data) -> None:
    """Refuse, naming the argument, ``data`` that is no dict, file or JSON text (Stan would say only
    "Expecting JSON object, found array" of a list)."""
    if data is not None and not isinstance(data, Mapping | str | os.PathLike):
        raise TypeError(
            "data must be a dict of the program's data, a Stan JSON file (a str or Path), JSON text, "
            f"or None; not {type(data).__name__} ({reprlib.repr(data)})"
        )


def _point_error(point, dim: int, kind: str = "unconstrained") -> TypeError:
    """The error for a point that is no vector of numbers (pybind11's own message lists overloads)."""
    return TypeError(
        f"the {kind} parameter vector must be a float array of shape ({dim},), "
        f"got {type(point).__name__} {point!r:.60}"
    )


INSTANCES_KEPT = 4
"""Stan instances kept for reuse (the most recently used): the posterior's, and a few of its subsets'."""

_instances: OrderedDict[tuple, tuple[Any, str]] = OrderedDict()
_instances_lock = threading.Lock()


def _stan_instance(program: CompiledProgram, data: StanData, seed: int) -> tuple[Any, str]:
    """The Stan instance of ``program`` on ``data`` and its data's JSON text: built once, then shared.

    Keyed by the program's library, a digest of the data (of the arrays'
    bytes, without converting them to JSON) and the seed. A Stan instance is
    read-only once built (each thread evaluating it has its own autodiff
    tape), so sharing it changes no value. Built under a lock: chains that
    ask for the same instance at once wait for one build.
    """
    text = None if isinstance(data, Mapping) else data_to_json(data)
    digest = data_digest(data) if text is None else hashlib.sha1(text.encode()).hexdigest()
    key = (str(program.library), digest, seed)
    with _instances_lock:
        if key in _instances:
            _instances.move_to_end(key)
            return _instances[key]
        text = data_to_json(data) if text is None else text
        try:
            instance = (program.module.Model(text, seed), text)
        except StanDataError as error:
            name = program.name.removesuffix("_model")
            raise data_error(str(error), data, text, name) from None
        _instances[key] = instance
        while len(_instances) > INSTANCES_KEPT:
            _instances.popitem(last=False)
        return instance


def _rebuild(program: CompiledProgram, data_json: str, seed: int, n_log_density: int, n_gradient: int):
    """A :class:`StanModel` unpickled: a new instance of the program with the same data and counts."""
    model = StanModel(program, data_json, seed=seed)
    model.n_log_density, model.n_gradient = n_log_density, n_gradient
    return model


def check_gradient_buffer(out: np.ndarray, dim: int) -> None:
    """Refuse a gradient buffer that C++ could not write in place.

    pybind11 silently copies an array of another dtype or memory layout into a
    temporary, so the gradient would be written there and ``out`` left as it was.

    Raises
    ------
    ValueError
        Naming what is wrong: not an array, dtype, shape, layout or read-only.
    """
    if not isinstance(out, np.ndarray):
        raise ValueError(f"gradient buffer `out` must be a NumPy array, got {type(out).__name__}")
    if out.dtype != np.float64:
        raise ValueError(f"gradient buffer `out` must have dtype float64, got {out.dtype}")
    if out.shape != (dim,):
        raise ValueError(f"gradient buffer `out` must have shape ({dim},), got {out.shape}")
    if not out.flags.c_contiguous:
        raise ValueError(
            f"gradient buffer `out` must be C-contiguous, got a strided view (strides {out.strides})"
        )
    if not out.flags.writeable:
        raise ValueError("gradient buffer `out` is read-only")


def unflatten(flat: np.ndarray, variables: Variables) -> dict[str, np.ndarray]:
    """Split the last axis of ``flat`` into Stan variables (column-major order)."""
    flat = np.asarray(flat)
    batch = flat.shape[:-1]
    out, start = {}, 0
    for name, dims in variables:
        size = math.prod(dims)
        block = flat[..., start : start + size]
        # Stan orders array elements column-major: reverse dims, then reverse axes back.
        shaped = block.reshape(batch + tuple(reversed(dims)))
        axes = list(range(len(batch))) + [len(batch) + i for i in reversed(range(len(dims)))]
        out[name] = shaped.transpose(axes)
        start += size
    return out


def _unit(dim: int, j: int, length: float) -> np.ndarray:
    """The point ``length`` along coordinate ``j`` of ``dim`` (not a row of np.eye: dim^2 at each call)."""
    point = np.zeros(dim)
    point[j] = length
    return point
