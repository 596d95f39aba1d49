"""Exceptions raised by the Stan runtime.

Every error a user meets names its cause: stanc's message (with line and
column) for a program that does not compile, Stan's message (naming the
variable) for bad data, and the C++ compiler's output for a failed build.

Evaluation errors follow Stan's own rule for NUTS: a ``std::domain_error``
(which includes a Stan ``reject`` statement and every failed argument check
such as a non-positive scale) raises :class:`StanDomainError`, and a sampler
treats it as a rejected proposal; any other exception raised while
evaluating is a defect of the program or of the call and raises
:class:`StanEvaluationError`, which stops a sampler. Running out of memory
(Stan's ``std::bad_alloc``) raises :class:`StanMemoryError`, naming the stage.
"""

import re


class StanError(Exception):
    """Base class of every error raised by stanaccel's Stan runtime."""


class StanCompileError(StanError, ValueError):
    """The Stan compiler (stanc) rejected the program; the message is stanc's."""


class StanBuildError(StanError, RuntimeError):
    """The C++ build of a compiled program failed, or no C++ compiler exists."""


class StanDataError(StanError, ValueError):
    """The data do not fit the program: missing, mis-typed, mis-shaped or out of bounds."""


class StanMemoryError(StanError, MemoryError):
    """The program asked for more memory than the machine has (C++ ``std::bad_alloc``).

    Sizes set by the data are the usual cause: ``matrix[N, N]`` with N = 10^6
    is 8 TB. The message names the stage, the program's line and the data's
    int values.
    """


class StanEvaluationError(StanError, RuntimeError):
    """Stan raised an exception while evaluating the model at a point."""


class StanDomainError(StanEvaluationError, ArithmeticError):
    """The log density is undefined at this point (Stan ``domain_error`` or ``reject``).

    Samplers treat this as a proposal with zero density: rejected and counted.
    It is also an ``ArithmeticError``, the type stanaccel's kernels (which
    know no Stan) read as "no density here", as they do NumPy's
    ``FloatingPointError`` and ``ZeroDivisionError``.
    """


def out_of_memory(message: str, program: str, stage: str, sizes: dict[str, int]) -> StanMemoryError | None:
    """A :class:`StanMemoryError` for Stan's message of a failed allocation; None for any other message.

    Stan's message is only ``std::bad_alloc`` and the program's line; this
    one names the program, the ``stage`` (such as "while reading its
    data"), and the data's int values (``sizes``), which set the sizes.
    """
    if "std::bad_alloc" not in message:
        return None
    line = re.search(r"\(in '.*?', line \d+, column \d+ to column \d+\)", message)
    where = f" {line[0]}" if line else ""
    shown = ", ".join(f"{name} = {value}" for name, value in list(sizes.items())[:8])
    given = f"; the data's int values: {shown}" if shown else ""
    return StanMemoryError(
        f"{program} ran out of memory {stage}{where}: it needs more memory than this machine has available"
        f"{given}. Check the sizes the data give it, or use a machine with more memory"
    )
