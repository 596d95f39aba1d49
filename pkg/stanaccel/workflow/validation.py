"""Check every table of a workflow file, keys and value types, before any step runs.

Each action declares a small schema: the keys a step may set and what each
value must be (the ``schema`` of its entry in :data:`stanaccel.workflow.actions.ACTIONS`).
A schema entry is

- a :class:`Kind`: an integer, a number (an integer is accepted), a string,
  true or false, a list, a table, or one of some names (:func:`one_of`);
- a :class:`ListOf` another entry, for lists whose items are checked;
- a :class:`Table` with a schema of its own (fixed, or a function of the
  table, as when a ``generator`` decides which options there are);
- :data:`EARLIER_STEP_OR_FILE`: the name of an earlier step, or a file;
  :data:`DATA_SOURCE` and :data:`WARMUP_SOURCE` ask the step for what it
  gives (:class:`Earlier`): a data set, or a Stan NUTS warm-up.

Where a table's keys are passed on to a function (a data generator, the
autoencoder's training, NUTS settings), :func:`keys_of` reads them from its
signature. A problem is a ``ValueError`` naming the file, the step, the key
and what was expected, for example::

    workflows/x.toml: step 'nuts' (action nuts): unknown key 'chians'; allowed: ...; did you mean 'chains'?
    workflows/x.toml: [workflow] seed = 'abc': expected a non-negative integer below 2**63

Names are checked too: a step's name is its folder in the output folder,
and a name holding ``..`` or ``/`` would put the step's files, and what
starting it afresh removes, outside the output folder (:func:`name_problem`).
A workflow file's names are read in Unicode's NFC form (:func:`normalise_names`),
so that two spellings of ``café`` are one step and one folder.
"""

from __future__ import annotations

import difflib
import inspect
import reprlib
import types
import typing
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


class Earlier(NamedTuple):
    """An earlier step, as a later step's reference sees it: its action, and what it gives.

    ``gives`` holds ``"data"`` (a data set and its program: a ``generate``
    step) and ``"warmup"`` (a Stan NUTS run whose warm-up a ``sample`` step
    can take: ``warmup_from``), as :data:`stanaccel.workflow.actions.ACTIONS` says.
    """

    action: str
    gives: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Where:
    """The place a table is checked: the file, the part of it, the steps before it, and every step's name.

    ``section`` prefixes every message (``"[workflow] "`` or ``"step 'x' (action y): "``).
    """

    file: Path
    section: str = ""
    earlier: Mapping[str, Earlier] = field(default_factory=dict)
    names: tuple[str, ...] = ()

    def error(self, message: str) -> ValueError:
        return ValueError(f"{self.file}: {self.section}{message}")


@dataclass(frozen=True)
class Kind:
    """A kind of value: what messages call it, the test a value must pass, and the names it may be
    (for a suggestion where a name is misspelt)."""

    expected: str
    accepts: Callable[[Any], bool]
    choices: tuple[str, ...] = ()

    def check(self, value: Any, key: str, where: Where) -> None:
        if not self.accepts(value):
            hint = _did_you_mean(value, self.choices) if isinstance(value, str) else ""
            raise where.error(f"{key} = {reprlib.repr(value)}: expected {self.expected}{hint}")


INTEGER = Kind("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
NUMBER = Kind("a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool))
STRING = Kind("a string", lambda v: isinstance(v, str))
BOOLEAN = Kind("true or false", lambda v: isinstance(v, bool))
LIST = Kind("a list", lambda v: isinstance(v, list))
TABLE = Kind("a table", lambda v: isinstance(v, dict))
ANYTHING = Kind("any value", lambda v: True)
SEED = Kind(
    "a non-negative integer below 2**63",
    lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63,
)


def one_of(*names: str) -> Kind:
    """A string among ``names``."""
    return Kind("one of " + ", ".join(map(repr, names)), lambda v: isinstance(v, str) and v in names, names)


@dataclass(frozen=True)
class ListOf:
    """A list whose items each match ``item``."""

    item: Any

    def check(self, value: Any, key: str, where: Where) -> None:
        LIST.check(value, key, where)
        for index, item in enumerate(value):
            self.item.check(item, f"{key}[{index}]", where)


@dataclass(frozen=True)
class Table:
    """A table with known keys: a schema (key to entry), or a function of the table giving one.

    ``required`` keys must be present.
    """

    keys: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    required: tuple[str, ...] = ()

    def schema(self, table: dict[str, Any]) -> dict[str, Any]:
        return self.keys(table) if callable(self.keys) else self.keys

    def check(self, value: Any, key: str, where: Where) -> None:
        TABLE.check(value, key, where)
        check_table(value, self.schema(value), where, key, self.required)


GIVEN = {
    "data": ("makes no data set", "a generate step", "a Stan JSON data file"),
    "warmup": (
        "runs no Stan NUTS whose warm-up could be taken",
        "a nuts step, or a sample step with method 'nuts'",
        "a netCDF file of stanaccel nuts or sample, or CmdStan CSV files",
    ),
}
"""What a step may give a later one (:class:`Earlier`): what a step without it does not do, the steps
that give it, and the files that can stand in for them."""


@dataclass(frozen=True)
class StepOrFile:
    """The name of an earlier step, or a file (beside the workflow file, or from the working folder).

    ``needs``: what the earlier step must give (a key of :data:`GIVEN`), or None. A name that is both
    an earlier step and a file is refused: the step would win, silently.
    """

    needs: str | None = None
    expected: str = "the name of an earlier step or a file"

    def check(self, value: Any, key: str, where: Where) -> None:
        if not isinstance(value, str):
            raise where.error(f"{key} = {reprlib.repr(value)}: expected {self.expected}")
        files = [p for p in (where.file.parent / value, Path(value)) if p.is_file()]
        if value not in where.earlier:
            if files:
                return
            earlier = ", ".join(where.earlier) or "none"
            raise where.error(
                f"{key} = {value!r} names no earlier step and no file (earlier steps: {earlier})"
                + _did_you_mean(value, where.earlier)
            )
        if files:
            raise where.error(
                f"{key} = {value!r} names both the earlier step {value!r} and the file {files[0]}: rename "
                f"the step, or write the file's path ({'./' + value!r})"
            )
        step = where.earlier[value]
        if self.needs is not None and self.needs not in step.gives:
            lacks, givers, files_instead = GIVEN[self.needs]
            these = [name for name, e in where.earlier.items() if self.needs in e.gives]
            raise where.error(
                f"{key} = {value!r} names step {value!r} (action {step.action}), which {lacks}: name "
                f"{givers} (earlier ones: {', '.join(these) or 'none'}), or {files_instead}"
            )


EARLIER_STEP_OR_FILE = StepOrFile()
DATA_SOURCE = StepOrFile("data")
"""A step's ``data``: an earlier ``generate`` step, or a Stan JSON file."""
WARMUP_SOURCE = StepOrFile("warmup")
"""A sample step's ``warmup_from`` (one name): an earlier Stan NUTS run, or a file."""


@dataclass(frozen=True)
class StanProgram:
    """A bundled program's name, or a ``.stan`` file (beside the workflow file or in the working folder)."""

    expected: str = "a bundled program's name or a .stan file"

    def check(self, value: Any, key: str, where: Where) -> None:
        from stanaccel.programs import bundled_programs

        if not isinstance(value, str):
            raise where.error(f"{key} = {reprlib.repr(value)}: expected {self.expected}")
        if value.endswith(".stan") or "/" in value:
            if (where.file.parent / value).is_file() or Path(value).is_file():
                return
            raise where.error(f"{key} = {value!r}: no such Stan program file")
        bundled = bundled_programs()
        if value not in bundled:
            raise where.error(
                f"{key} = {value!r}: no bundled program of that name (have {', '.join(bundled)}; "
                "a file of your own ends in .stan)" + _did_you_mean(value, bundled)
            )


STAN_PROGRAM = StanProgram()


@dataclass(frozen=True)
class ExecutorSpec:
    """Where a workflow's independent runs go: ``serial``, ``threads:N``, ``processes:N``, ``dask:...``."""

    def check(self, value: Any, key: str, where: Where) -> None:
        from stanaccel.executors import check_spec

        STRING.check(value, key, where)
        try:
            check_spec(value)
        except ValueError as error:
            raise where.error(str(error)) from None  # "executor 'dask:locl': expected ..."


RUN_FILES = ("run.json", "provenance.json", "workflow.toml", "report.html")
"""The files a run writes in its output folder beside the steps' folders: no step may be named so."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be the name of a file or folder inside another folder, or None if it can.

    Such a name is one plain name: not empty, not ``.`` or ``..``, no path
    separator (``/``, or ``\\`` on Windows), not an absolute path, no control
    character or invisible one (a zero-width space, a direction mark: two
    such names look alike), in Unicode's NFC form (``café`` written with a
    combining accent is another folder that looks the same), and not hidden
    (a leading dot: stanaccel's own files in a folder, such as its lock and
    a step's ``.key``, start with one).
    """
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} is a path to a folder, not a name"
    if name.startswith(("/", "\\")) or Path(name).is_absolute():
        return "it is an absolute path"
    if "/" in name or "\\" in name:
        return "it holds a path separator, / or \\"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "it holds a control character"
    hidden = [c for c in name if unicodedata.category(c) in ("Cf", "Zl", "Zp")]
    if hidden:
        return (
            f"it holds an invisible character, U+{ord(hidden[0]):04X} "
            f"({unicodedata.name(hidden[0], 'unassigned')}), which makes look-alike names"
        )
    if unicodedata.normalize("NFC", name) != name:
        return (
            "it is not in Unicode's NFC form (a letter and a combining accent, where one character is "
            f"usual), so it would be a folder that looks like {unicodedata.normalize('NFC', name)!r}"
        )
    if name.startswith("."):
        return "it starts with a dot, as stanaccel's own hidden files do"
    if len(name.encode()) > 255:
        return "it is longer than 255 bytes, the longest name most file systems take"
    return None


@dataclass(frozen=True)
class PlainName:
    """A plain name (:func:`name_problem`) of a file inside the output folder, ending in ``suffix``.

    ``beside_steps``: the file goes in the output folder beside the steps' folders, so it must not be
    a step's name.
    """

    suffix: str = ""
    beside_steps: bool = False

    def check(self, value: Any, key: str, where: Where) -> None:
        STRING.check(value, key, where)
        problem = name_problem(value)
        if problem is None and not value.endswith(self.suffix):
            problem = f"it does not end in {self.suffix}"
        if problem is not None:
            raise where.error(f"{key} = {value!r} is not a plain file name: {problem}")
        if self.beside_steps and value in where.names:
            raise where.error(
                f"{key} = {value!r} is the name of step {value!r}, whose folder is in the output folder "
                "where this file goes: give the file another name"
            )


FOLDER_NAME = PlainName()


def check_step_names(steps: list[dict[str, Any]], file: Path | None) -> None:
    """Refuse a step name that is not a plain folder name, or names one of the run's own files.

    Each step writes into ``<output>/<name>``, and a step whose settings
    changed empties what it wrote there: a name such as ``../x`` or ``/x``
    would put that folder outside the output folder.

    Raises
    ------
    ValueError
        Naming the workflow file, the step and the rule it breaks.
    """
    where = Where(file or Path("workflow"))
    for step in steps:
        name = step.get("name")
        if not isinstance(name, str):
            continue  # check_workflow says that a step needs a name
        problem = name_problem(name)
        if problem is None and name in RUN_FILES:
            problem = "the run writes a file of that name in the output folder"
        if problem is not None:
            raise where.error(
                f"step {name!r}: its name is not a plain folder name: {problem}; a step's name is its "
                "folder in the output folder, so use a plain name (letters, digits, '-', '_')"
            )


FOLDER = Kind("a folder's path, not empty", lambda v: isinstance(v, str) and v.strip() != "")

WORKFLOW_KEYS = {
    "name": FOLDER_NAME,
    "seed": SEED,
    "output": FOLDER,
    "cache": BOOLEAN,
    "executor": ExecutorSpec(),
}
STEP_KEYS = {"name": STRING, "action": STRING, "seed": SEED}


def check_workflow(config: dict[str, Any], path: Path, actions: Mapping[str, Any]) -> None:
    """Check a parsed workflow file: its tables, every step's keys and values, and step references.

    Parameters
    ----------
    actions
        The actions a step may name, each with its ``schema`` (a :class:`Table`):
        the runner passes the table :data:`stanaccel.workflow.actions.ACTIONS`
        (the actions build on this module, not it on them).

    Raises
    ------
    ValueError
        Naming the file, the step, the key and what was expected.
    """
    known = sorted(actions)
    where = Where(path)
    for name in config:
        if name not in ("workflow", "steps"):
            what = f"table [{name}]" if isinstance(config[name], dict | list) else f"top-level key {name!r}"
            raise where.error(
                f"unknown {what}; allowed: [workflow], [[steps]]" + _did_you_mean(name, ["workflow", "steps"])
            )
    head = config.get("workflow", {})
    TABLE.check(head, "workflow", where)
    check_table(head, WORKFLOW_KEYS, Where(path, "[workflow] "))
    steps = config.get("steps", [])
    if not steps:
        raise where.error("no [[steps]] to run")
    ListOf(TABLE).check(steps, "steps", where)
    names: list[str] = []
    for index, step in enumerate(steps):
        if not isinstance(step.get("name"), str) or not isinstance(step.get("action"), str):
            raise where.error(f"step {index + 1} needs a name and an action (strings)")
        if step["action"] not in known:
            raise where.error(
                f"step {step['name']!r} has unknown action {step['action']!r}; have {known}"
                + _did_you_mean(step["action"], known)
            )
        if step["name"] in names:
            raise where.error(f"two steps are named {step['name']!r}")
        names.append(step["name"])
    check_step_names(steps, path)
    earlier: dict[str, Earlier] = {}
    for step in steps:
        schema = actions[step["action"]].schema
        place = Where(path, f"step {step['name']!r} (action {step['action']}): ", dict(earlier), tuple(names))
        check_table(step, {**STEP_KEYS, **schema.schema(step)}, place, "", schema.required)
        gives = getattr(actions[step["action"]], "gives", None)
        earlier[step["name"]] = Earlier(step["action"], frozenset(gives(step) if gives else ()))


REFERENCE_KEYS = ("data", "warmup_from")
"""Step keys whose text may name an earlier step."""


def normalise_names(config: dict[str, Any]) -> None:
    """Put a parsed workflow file's names in Unicode's NFC form, in place: the workflow's name, each
    step's, and each reference (:data:`REFERENCE_KEYS`) that names a step once so written.

    ``café`` typed with a combining accent and with one character are then one name (two steps so
    named are refused as two steps of one name), not two folders that look alike.
    """

    def nfc(text: Any) -> Any:
        return unicodedata.normalize("NFC", text) if isinstance(text, str) else text

    head, steps = config.get("workflow"), config.get("steps")
    if isinstance(head, dict) and "name" in head:
        head["name"] = nfc(head["name"])
    if not isinstance(steps, list):
        return
    tables = [step for step in steps if isinstance(step, dict)]
    for step in tables:
        if "name" in step:
            step["name"] = nfc(step["name"])
    names = {step.get("name") for step in tables}
    for step in tables:
        for key in REFERENCE_KEYS:
            if isinstance(step.get(key), str) and nfc(step[key]) in names:
                step[key] = nfc(step[key])


def check_table(
    table: dict[str, Any], schema: dict[str, Any], where: Where, path: str = "", required: Iterable[str] = ()
) -> None:
    """Check the known keys' values (in the schema's order), then refuse any unknown key."""
    prefix = f"{path}: " if path else ""
    for key in required:
        if key not in table:
            raise where.error(f"{prefix}missing key {key!r}")
    for key, entry in schema.items():
        if key in table:
            entry.check(table[key], f"{path}.{key}" if path else key, where)
    for key in table:
        if key not in schema:
            raise where.error(
                f"{prefix}unknown key {key!r}; allowed: {', '.join(sorted(schema))}"
                + _did_you_mean(key, schema)
            )


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# Settings read from a function's signature.

_KINDS = {bool: BOOLEAN, int: INTEGER, float: NUMBER, str: STRING, list: LIST, tuple: LIST,
          np.ndarray: LIST, dict: TABLE}  # fmt: skip


def kind_of(hint: Any) -> Kind | None:
    """The kind of value an annotation asks for; None for a Python object a file cannot hold."""
    if hint is Any:
        return ANYTHING
    union = typing.get_origin(hint) in (types.UnionType, typing.Union)
    members = [m for m in (typing.get_args(hint) if union else (hint,)) if m is not type(None)]
    kinds = [_KINDS.get(typing.get_origin(m) or m) for m in members]
    if None in kinds:
        return None
    if len(kinds) == 1:
        return kinds[0]
    return Kind(" or ".join(k.expected for k in kinds), lambda v: any(k.accepts(v) for k in kinds))


def keys_of(function: Callable, *, skip: Iterable[str] = ()) -> dict[str, Kind]:
    """The settings a function (a class: its constructor) takes, each with the kind its annotation asks for.

    Parameters without a default are the caller's to give (the data, the
    draws), as are those named in ``skip``; parameters annotated with a
    Python class (a kernel object) cannot be written in a file and are left
    out; unannotated ones take any value.
    """
    hints = typing.get_type_hints(function.__init__ if isinstance(function, type) else function)
    keys = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.default is inspect.Parameter.empty or name in skip:
            continue
        kind = kind_of(hints.get(name, Any))
        if kind is not None:
            keys[name] = kind
    return keys


def generator_options(name: str) -> dict[str, Kind]:
    """The options of a bundled data generator (``stanaccel.datasets``) less ``seed``; {} for no generator."""
    from stanaccel.datasets import GENERATORS, generator

    if name not in GENERATORS:
        return {}
    return keys_of(generator(name), skip=("seed",))


PROGRAM_KEYS = ("program", "latent_program")
"""Keys that name a Stan program, in a step or in a table inside it (an approximation's ``program``)."""


def check_programs(steps: list[dict[str, Any]], file: Path | None) -> None:
    """Compile-check (stanc only, a fraction of a second each) every Stan program file the steps name.

    Bundled programs are not checked (they compile). Runs before any step,
    so that a syntax error in a late step's program is found before the
    earlier steps' sampling.

    Raises
    ------
    ValueError
        Naming the workflow file, the step, the key and the program file, with stanc's message.
    """
    from stanaccel.sampling.program import Program
    from stanaccel.stan.compiler import program_info
    from stanaccel.stan.errors import StanCompileError

    where = Where(file or Path("workflow"))
    checked: set[Path] = set()
    for step in steps:
        for key, value in _program_settings(step):
            if not (value.endswith(".stan") or "/" in value):
                continue
            path = where.file.parent / value if (where.file.parent / value).is_file() else Path(value)
            if not path.is_file() or path.resolve() in checked:
                continue
            try:
                program = Program.of(path)
                program_info(program.code, program.label)
            except StanCompileError as error:
                raise ValueError(
                    f"{where.file}: step {step.get('name')!r}: {key} = {value!r} does not compile, "
                    f"so no step was run:\n{error}"
                ) from None
            checked.add(path.resolve())


def _program_settings(table: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    """The (key, text) pairs of ``table`` and the tables and lists inside it that name a program."""
    for key, value in table.items():
        name = f"{prefix}{key}"
        if key in PROGRAM_KEYS and isinstance(value, str):
            yield name, value
        elif isinstance(value, dict):
            yield from _program_settings(value, f"{name}.")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    yield from _program_settings(item, f"{name}[{index}].")


def check_warmup_programs(steps: list[dict[str, Any]], file: Path | None) -> None:
    """Refuse a step whose ``warmup_from`` names an earlier step that runs another program, where the
    workflow file decides both programs (a ``program`` key, or data from a ``generate`` step).

    A warm-up's step size, metric and points are per parameter, so the programs must declare the
    same parameters (``stanc --info``, a fraction of a second; sizes set by the data are checked when
    the step runs). Found here, before the earlier steps compile and sample, not after them.

    Raises
    ------
    ValueError
        Naming the workflow file, the step, both programs and their parameters.
    """
    where = Where(file or Path("workflow"))
    earlier: dict[str, dict[str, Any]] = {}
    for step in steps:
        source = step.get("warmup_from")
        if isinstance(source, str) and source in earlier:
            ours, theirs = _step_program(step, earlier, where), _step_program(earlier[source], earlier, where)
            if ours is not None and theirs is not None and ours != theirs:
                mine, other = _parameters(ours), _parameters(theirs)
                if mine != other:
                    raise where.error(
                        f"step {step.get('name')!r}: warmup_from = {source!r} names step {source!r}, which "
                        f"runs {_shown(theirs)} (parameters {', '.join(other)}); this step runs "
                        f"{_shown(ours)} (parameters {', '.join(mine)}): a warm-up is for the same program "
                        "(its step size, metric and points are per parameter); take it from a step on this "
                        "program, or leave warmup_from out"
                    )
        if isinstance(step.get("name"), str):
            earlier[step["name"]] = step


def _step_program(step: dict[str, Any], earlier: dict[str, dict[str, Any]], where: Where) -> Path | None:
    """The program file a step runs, where the workflow file decides it; None where it does not."""
    from stanaccel.datasets import PROGRAMS
    from stanaccel.programs import program_path

    program = step.get("program")
    data = earlier.get(step.get("data")) if isinstance(step.get("data"), str) else None
    if program is None and data is not None and data.get("action") == "generate":
        program = PROGRAMS.get(data.get("generator"))
    if not isinstance(program, str):
        return None
    if program.endswith(".stan") or "/" in program:
        path = where.file.parent / program if (where.file.parent / program).is_file() else Path(program)
        return path.resolve() if path.is_file() else None
    try:
        return program_path(program).resolve()
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _parameters(program: Path) -> list[str]:
    """The names of the parameters a program declares, in order."""
    from stanaccel.sampling.program import Program

    return list(Program.of(program).info["parameters"])


def _shown(program: Path) -> str:
    """A program for a message: a bundled one by name, a file by path."""
    from stanaccel.programs import program_path

    try:
        if program_path(program.stem).resolve() == program:
            return program.stem
    except (FileNotFoundError, ValueError, KeyError):
        pass
    return str(program)
