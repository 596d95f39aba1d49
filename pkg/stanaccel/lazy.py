"""A package's exports imported on first use (PEP 562).

A package whose ``__init__`` imports its exports makes every import of any
module in it pay for them: importing ``stanaccel.workflow.cache`` (as pytest
does for its warning filter) would load the workflow runner and with it
ArviZ, SciPy and Numba. With :func:`lazy_exports` the package's ``__init__``
imports nothing, and each exported name is imported the first time it is
read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of a package whose exports are imported on first use.

    Parameters
    ----------
    package : str
        The package's name (its ``__name__``).
    exports : dict
        Each exported name and the module it comes from.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__)``, to assign at the package's module level. A name read once is
        kept in the package, so later reads are ordinary attribute reads; ``dir`` (and Sphinx's
        autodoc, and completion) lists the exports not imported yet.
    """

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
