"""Exceptions raised by the Stan runtime.

Every error a user meets names its cause: stanc's message (with line and
column) for a program that does not compile, Stan's message (naming the
variable) for bad data, and the C++ compiler's output for a failed build.

Evaluation errors follow Stan's own rule for NUTS: a ``std::domain_error``
(which includes a Stan ``reject`` statement and every failed argument check
such as a non-positive scale) raises :class:`StanDomainError`, and a sampler
treats it as a rejected proposal; any other exception raised while
evaluating is a defect of the program or of the call and raises
:class:`StanEvaluationError`, which stops a sampler.
"""


class StanError(Exception):
    """Base class of every error raised by stanaccel's Stan runtime."""


class StanCompileError(StanError, ValueError):
    """The Stan compiler (stanc) rejected the program; the message is stanc's."""


class StanBuildError(StanError, RuntimeError):
    """The C++ build of a compiled program failed, or no C++ compiler exists."""


class StanDataError(StanError, ValueError):
    """The data do not fit the program: missing, mis-typed, mis-shaped or out of bounds."""


class StanEvaluationError(StanError, RuntimeError):
    """Stan raised an exception while evaluating the model at a point."""


class StanDomainError(StanEvaluationError, ArithmeticError):
    """The log density is undefined at this point (Stan ``domain_error`` or ``reject``).

    Samplers treat this as a proposal with zero density: rejected and counted.
    It is also an ``ArithmeticError``, the type stanaccel's kernels (which
    know no Stan) read as "no density here", as they do NumPy's
    ``FloatingPointError`` and ``ZeroDivisionError``.
    """
