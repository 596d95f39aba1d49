"""What ``method = "auto"`` takes: its settings, checked before any work (a setting that only some
methods take is refused, naming them)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from stanaccel.errors import ConfigError
from stanaccel.observations import Observations
from stanaccel.sampling.config import AUTO, LARGEST, _check, keys, setting
from stanaccel.sampling.methods import METHODS


def is_auto(method: str) -> bool:
    """Whether ``method`` asks ``sample`` to choose the method."""
    return method == AUTO


@dataclass(frozen=True)
class AutoSettings:
    """What ``method = "auto"`` takes: the full run's size, the pilots' length, and the observations."""

    chains: int = setting(4, doc="chains of the full run", kind="int", low=1)
    draws: int = setting(1000, doc="draws per chain of the full run", kind="int", low=1)
    pilot_draws: int = setting(
        100, doc="draws per chain of each pilot (the full run's chains; the first draws of the chosen run; "
        "at most the run's draws)", kind="int", low=20, high=LARGEST,
    )  # fmt: skip
    observations: Observations | None = setting(
        doc="which data are per observation: dc is then piloted over control variates", kind="observations"
    )


AUTO_KEYS = tuple(f.name for f in fields(AutoSettings))
"""The settings ``method = "auto"`` takes."""


def auto_settings(
    settings: dict[str, Any] | None, sources: dict[str, str] | str = "settings"
) -> AutoSettings:
    """Check the settings of ``method = "auto"``; a setting that only some methods take is refused.

    Raises
    ------
    ConfigError
        A setting ``auto`` does not take, naming the methods that do and what to do instead.
    """
    if settings is not None and not isinstance(settings, dict):
        raise TypeError(f"settings must be a dict of setting name -> value, not a {type(settings).__name__}")
    known = {f.name: f for f in fields(AutoSettings)}
    values = {}
    for key, value in (settings or {}).items():
        if value is None or key == "method":
            continue
        where = sources if isinstance(sources, str) else sources.get(key, "settings")
        if key not in known:
            owners = [name for name in METHODS if key in keys(name)]
            takes = f"it takes only {', '.join(known)}"
            if key == "warmup":
                raise ConfigError(
                    f"{where}: warmup = {value!r}: method 'auto' runs its own warm-ups (a cheap one shared "
                    f"by the candidates that take it, a short NUTS one for the NUTS pilot); {takes}. "
                    "To choose the warm-up, choose the method (--method hmc --set warmup=pathfinder)"
                )
            if not owners:
                raise ConfigError(f"{where}: unknown setting {key!r} for method 'auto'; {takes}")
            raise ConfigError(
                f"{where}: setting {key!r} is a setting of {', '.join(owners)}, not of method 'auto', which "
                f"chooses the method itself and gives each candidate its own settings; {takes}. To set "
                f"{key}, choose the method (--method {owners[0]} --set {key}=...)"
            )
        values[key] = _check(key, value, known[key].metadata, f"{where}: ")
    return AutoSettings(**values)
