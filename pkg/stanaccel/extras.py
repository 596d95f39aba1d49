"""Optional extras: the packages only some methods use, and the clear error when one is missing.

``pip install stanaccel`` runs NUTS, the exact kernels, tempering, the
discretizing chain and the studies without them; two extras add:

- ``stanaccel[latent]``: TensorFlow and Keras, for the autoencoder methods
  (``ae-hmc``, ``ae-pcn``, ``latent-nuts``, the latent study) and the GP
  density model's variational method;
- ``stanaccel[distributed]``: dask.distributed, for the Dask executor.

This module imports nothing else of stanaccel.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

LATENT_INSTALL = 'pip install "stanaccel[latent]"'
LATENT_PACKAGES = ("tensorflow", "keras")


class MissingExtraError(ImportError):
    """A method or executor needs an optional extra that is not installed; the message names it."""


def latent_missing(what: str) -> str | None:
    """The message for ``what`` (a method, a study) when TensorFlow or Keras is missing, else None.

    A cheap check (no import of TensorFlow), for raising before any expensive work.
    """
    missing = [name for name in LATENT_PACKAGES if not _importable(name)]
    if not missing:
        return None
    return (
        f"{what} needs {' and '.join(missing)} (the autoencoders), which stanaccel installs only "
        f"with its 'latent' extra: {LATENT_INSTALL}"
    )


def require_latent(what: str) -> None:
    """Raise :class:`MissingExtraError` naming the ``latent`` extra if ``what`` cannot run here.

    Raises
    ------
    MissingExtraError
        TensorFlow or Keras is not installed (``pip install "stanaccel[latent]"``).
    """
    message = latent_missing(what)
    if message:
        raise MissingExtraError(message)


def import_keras(what: str = "this method") -> tuple[ModuleType, ModuleType]:
    """TensorFlow and Keras 3 on the TensorFlow backend, quiet; ``(tensorflow, keras)``.

    Raises
    ------
    MissingExtraError
        Either does not import (``pip install "stanaccel[latent]"``).
    """
    require_latent(what)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    try:
        tf = importlib.import_module("tensorflow")
        keras = importlib.import_module("keras")
    except ImportError as exc:
        raise MissingExtraError(
            f"{what} needs TensorFlow and Keras, which do not import here ({exc}): {LATENT_INSTALL}"
        ) from exc
    return tf, keras


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or half-imported package
        return False
