"""Writing a study's rows as CSV, Markdown and JSON, and printing the Markdown."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from stanaccel.diagnostics.files import json_text


def write_table(folder: Path, name: str, rows: list[dict], columns: list[str]) -> str:
    """``name.csv`` (every field), ``name.md`` (``columns``) and ``name.json``; returns the Markdown."""
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(folder / f"{name}.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |")
    table = "\n".join(lines)
    (folder / f"{name}.md").write_text(table + "\n")
    (folder / f"{name}.json").write_text(json_text(rows))  # strict JSON: NaN as null
    return table


def cell(value) -> str:
    """A table cell: floats to three significant digits, NaN blank."""
    if isinstance(value, float | np.floating):
        return "" if np.isnan(value) else f"{value:.3g}"
    return str(value)
