"""Stan's NUTS in checkpointed chunks, so a stopped run resumes to the same draws.

Stan's services run a whole chain in C++, its random generator inside, so
nothing between two iterations can be saved from Python. A checkpointed run
therefore splits each chain into phases that each start from what the last
one left:

1. The warm-up, one service call with no sampling iterations (Stan's stream
   ``(seed, chain + 1)``, as an unchunked run). When it ends, its draws,
   adapted step size and inverse metric are checkpointed; a run stopped
   during the warm-up does it again.
2. The sampling, in chunks of ``chunk`` kept draws. Chunk ``k`` of chain
   ``c`` starts at the last kept draw before it, with the adapted (or given)
   step size and inverse metric and no warm-up, and is seeded by
   :func:`stanaccel.seeds.spawn_seed` ``(seed, c, k)``. Each finished chunk
   is checkpointed; a run stopped during a chunk does that chunk again.

A run never stopped makes the same chunks, so a resumed run gives the same
draws. They differ from an unchunked run with the same seed (other random
streams after the warm-up), with the same distribution. With ``thin`` above
1 the next chunk starts from the chunk's last kept draw, not from the
thinned-out iterations after it.

Each part of a chain is checkpointed once, when it ends, in its own file
(``nuts-chain-<c>-warmup.pkl``, ``nuts-chain-<c>-<k>.pkl``), written
atomically with a fingerprint of the run (settings, dimension, inits, initial
metrics and step sizes, chunk size), so a write costs one chunk however long
the run; a checkpoint of another run is ignored. Each file has a manifest
beside it (``.pkl.json``: size and SHA-256, written last); a part that does
not match it is damaged: it is not resumed from (with a warning naming the
file) and the chain runs again from there. Each part keeps the seconds it
took, and a resumed run is charged them (:attr:`ChunkedChain.seconds_before`).
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from stanaccel.atomic import read_checked_pickle, write_checkpoint
from stanaccel.seeds import spawn_seed
from stanaccel.stan.services import SAMPLER_COLUMNS, chain_settings, init_texts

CHUNK_DRAWS = 100
"""Kept draws per checkpointed chunk: a kill loses at most this much of each chain's sampling."""

FORMAT = 1


class NutsCheckpointWarning(UserWarning):
    """A NUTS checkpoint was found but not resumed from (another run's, unreadable, or damaged)."""


def fingerprint(config, dim: int, inits: list[str], metrics: np.ndarray, step_sizes, chunk: int) -> dict:
    """What makes a chunked run's draws: a checkpoint resumes only a run with the same.

    The number of draws is not in it: chunk k's draws do not depend on how
    many follow, so a longer run continues a shorter one's chunks (``auto``'s
    NUTS pilot is the start of its full run). A last chunk shorter than this
    run's is not resumed from (:meth:`ChunkedChain._load`).
    """
    settings = dataclasses.asdict(config)
    settings.pop("draws", None)
    return {
        "settings": settings,
        "dim": int(dim),
        "inits": zlib.crc32("\n".join(inits).encode()),
        "metrics": zlib.crc32(np.ascontiguousarray(metrics, dtype=float).tobytes()),
        "step_sizes": [float(s) for s in step_sizes],
        "chunk": int(chunk),
    }


class ChunkedChain:
    """One chain run as a warm-up and chunks (see the module notes), stoppable, with its progress.

    Has ``run``, ``iterations``, ``request_stop`` and ``result`` as the
    bridge's ``NutsChain``, so the waiting and assembling code serves both.
    """

    def __init__(self, model, config, chain: int, init: str, metric: np.ndarray, step_size: float, **shared):
        self.model, self.config, self.chain = model, config, chain
        self.init, self.metric, self.step_size = init, metric, float(step_size)
        self.folder: Path = shared["folder"]
        self.chunk: int = shared["chunk"]
        self.fingerprint: dict = shared["fingerprint"]
        self.current = None
        self.stopping = False
        self.pieces: list[dict] = []
        self.saved = self._load()
        self.done_before = self._iterations_saved()
        self.seconds_before = self._seconds_saved()

    def path(self, part: str) -> Path:
        """The checkpoint file of one part of the chain ("warmup", or a chunk's number)."""
        return self.folder / f"nuts-chain-{self.chain}-{part}.pkl"

    def _read(self, part: str) -> dict | None:
        """A part's checkpoint if it is of this run; None (warned where it is another's) if not."""
        path = self.path(part)
        if not path.is_file():
            return None
        try:
            saved = read_checked_pickle(path)
        except ValueError as error:
            reason = str(error)
        else:
            if isinstance(saved, dict) and saved.get("format") == FORMAT:
                if saved.get("fingerprint") == self.fingerprint:
                    return saved["piece"]
                differ = [k for k in self.fingerprint if saved["fingerprint"].get(k) != self.fingerprint[k]]
                reason = f"{path} is of another run (it differs in {', '.join(differ)})"
            else:
                reason = f"{path} is not a stanaccel NUTS checkpoint of this version"
        warnings.warn(
            f"NUTS chain {self.chain}: not resuming: {reason}; the chain starts there afresh",
            NutsCheckpointWarning,
            stacklevel=2,
        )
        return None

    def _load(self) -> dict:
        """The checkpointed warm-up and the chunks after it, each file written once when its part ended."""
        saved = {"warmup": self._read("warmup") if self.config.warmup > 0 else None, "chunks": []}
        if self.config.warmup > 0 and saved["warmup"] is None:
            return saved
        per_chunk = self.chunk * self.config.thin
        n_chunks = -(-self.config.draws // per_chunk)
        while (
            len(saved["chunks"]) < n_chunks and (piece := self._read(str(len(saved["chunks"])))) is not None
        ):
            if piece["iterations"] != min(per_chunk, self.config.draws - len(saved["chunks"]) * per_chunk):
                break  # the last chunk of a shorter run: this run's chunk there is longer
            saved["chunks"].append(piece)
        return saved

    def _iterations_saved(self) -> int:
        warm = self.config.warmup if self.saved["warmup"] is not None else 0
        return warm + sum(piece["iterations"] for piece in self.saved["chunks"])

    def _seconds_saved(self) -> float:
        """The seconds the checkpointed parts took when they ran (what resuming from them is charged)."""
        parts = ([self.saved["warmup"]] if self.saved["warmup"] is not None else []) + self.saved["chunks"]
        return float(sum(piece["seconds"] for piece in parts))

    def iterations(self) -> int:
        """Iterations done, the resumed ones included (for the progress bars)."""
        current = self.current
        return self.done_before + (current.iterations() if current is not None else 0)

    def request_stop(self) -> None:
        self.stopping = True
        current = self.current
        if current is not None:
            current.request_stop()

    def _service(self, settings: dict) -> dict | None:
        """Run one service call; None if stopped before it began."""
        base = chain_settings(self.config, self.chain, self.init, "", self.step_size)
        run = self.model.program.module.NutsChain(self.model._model, {**base, **settings})
        self.current = run
        if self.stopping:
            return None
        run.run()
        self.current = None
        self.done_before += run.iterations()
        return _piece(run.result(), run.iterations())

    def _save(self, part: str, piece: dict) -> None:
        write_checkpoint(self.path(part), {"format": FORMAT, "fingerprint": self.fingerprint, "piece": piece})

    def run(self) -> None:
        """The warm-up (unless checkpointed), then every chunk not yet checkpointed."""
        import json

        config, metric_text = self.config, json.dumps({"inv_metric": self.metric.tolist()})
        if config.warmup > 0 and self.saved["warmup"] is None:
            piece = self._service({"inv_metric": metric_text, "num_samples": 0})
            if piece is None or piece["error"] or piece["interrupted"]:
                self.pieces = [piece] if piece is not None else []
                return
            self.saved["warmup"] = piece
            self._save("warmup", piece)
        warm = self.saved["warmup"]
        step_size, inv_metric = self.step_size, self.metric
        if warm is not None and warm["inv_metric"].size:  # adapted
            step_size = float(warm["stepsize"])
            inv_metric = warm["inv_metric"][:, 0] if config.metric == "diag" else warm["inv_metric"]
        sampling = {
            "adapt": False,
            "num_warmup": 0,
            "stepsize": step_size,
            "inv_metric": json.dumps({"inv_metric": np.asarray(inv_metric).tolist()}),
            "chain": 1,
        }
        per_chunk = self.chunk * config.thin
        n_chunks = -(-config.draws // per_chunk)
        dim, n_sampler = self.model.dim, len(SAMPLER_COLUMNS)
        for k in range(len(self.saved["chunks"]), n_chunks):
            last = ([warm] if warm is not None else []) + self.saved["chunks"]
            last = [p for p in last if p["diagnostic_rows"].shape[0]]
            init = (
                init_texts(self.model, last[-1]["diagnostic_rows"][-1, n_sampler : n_sampler + dim], 1)[0]
                if last
                else self.init
            )
            settings = {
                **sampling,
                "init": init,
                "seed": spawn_seed(config.seed, self.chain, k),
                "num_samples": min(per_chunk, config.draws - k * per_chunk),
            }
            piece = self._service(settings)
            if piece is None:
                break
            if piece["error"] or piece["interrupted"]:
                self.pieces = [piece]
                break
            self._save(str(k), piece)
            self.saved["chunks"].append(piece)

    def result(self) -> dict:
        """The chain's pieces merged into one result as ``NutsChain.result`` gives it."""
        warm = self.saved["warmup"]
        pieces = ([warm] if warm is not None else []) + self.saved["chunks"] + self.pieces
        named = [p for p in pieces if p["sample_names"]]
        rows = [p for p in named if p["sample_rows"].shape[0]]
        first = named[0] if named else None
        error = next((p["error"] for p in pieces if p["error"]), "")
        return {
            "sample_names": first["sample_names"] if first else [],
            "sample_rows": np.vstack([p["sample_rows"] for p in rows]) if rows else np.zeros((0, 0)),
            "diagnostic_rows": np.vstack([p["diagnostic_rows"] for p in rows]) if rows else np.zeros((0, 0)),
            "rejected": np.concatenate([_rejected(p) for p in rows]) if rows else np.zeros(0, dtype=bool),
            "stepsize": warm["stepsize"] if warm is not None else float("nan"),
            "inv_metric": warm["inv_metric"] if warm is not None else np.zeros((0, 0)),
            "messages": [m for p in pieces for m in p["messages"]],
            "seconds": float(sum(p["seconds"] for p in pieces)),
            "error": error,
            "interrupted": self.stopping or any(p["interrupted"] for p in pieces),
        }


def _piece(result: dict, iterations: int) -> dict[str, Any]:
    """What a checkpoint keeps of one service call's result."""
    return {
        "sample_names": list(result["sample_names"]),
        "sample_rows": np.asarray(result["sample_rows"]),
        "diagnostic_rows": np.asarray(result["diagnostic_rows"]),
        "rejected": np.asarray(result["rejected"], dtype=bool),
        "stepsize": float(result["stepsize"]),
        "inv_metric": np.asarray(result["inv_metric"]),
        "messages": list(result["messages"]),
        "seconds": float(result["seconds"]),
        "error": result["error"],
        "interrupted": bool(result["interrupted"]),
        "iterations": int(iterations),
    }


def _rejected(piece: dict) -> np.ndarray:
    """A piece's per-row rejections by the program; none known in a piece of an older stanaccel."""
    return np.asarray(piece.get("rejected", np.zeros(piece["sample_rows"].shape[0], dtype=bool)), dtype=bool)


def chunked_chains(model, config, inits, metrics, step_sizes, folder: Path, chunk: int) -> list:
    """One :class:`ChunkedChain` per chain, each resuming from its checkpoint in ``folder`` if any."""
    if chunk < 1:
        raise ValueError(f"checkpoint_draws must be at least 1, not {chunk}")
    shared = {
        "folder": Path(folder),
        "chunk": int(chunk),
        "fingerprint": fingerprint(config, model.dim, inits, metrics, step_sizes, chunk),
    }
    return [
        ChunkedChain(model, config, c, inits[c], metrics[c], step_sizes[c], **shared)
        for c in range(config.chains)
    ]
