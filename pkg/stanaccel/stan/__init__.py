"""The Stan runtime: compile a program, evaluate its log density, run Stan's NUTS.

Imports nothing else of stanaccel, so it can be read and tested alone.
"""

from stanaccel.stan.compiler import CompiledProgram, compile_program
from stanaccel.stan.data import read_data, write_data
from stanaccel.stan.errors import (
    StanBuildError,
    StanCompileError,
    StanDataError,
    StanDomainError,
    StanError,
    StanEvaluationError,
    StanMemoryError,
)
from stanaccel.stan.model import StanModel, unflatten

__all__ = [
    "CompiledProgram",
    "StanBuildError",
    "StanCompileError",
    "StanDataError",
    "StanDomainError",
    "StanError",
    "StanEvaluationError",
    "StanMemoryError",
    "StanModel",
    "compile_program",
    "read_data",
    "unflatten",
    "write_data",
]
