"""What the page needs to draw one sampling position, sent once per position (not per slider move).

The Sampling tab's chart, readout, cumulative curve and constraint readout are computed in the page
by viz/js/sampling.js (a mirror of agent/sampling.py) and drawn by viz/js/sampling_view.js. The
server sends, when a position's logits are ready:

- the logits of the whole vocabulary as float32, base64 (|V| x 4 bytes: 196,608 for SmolLM2,
  262,144 characters): float32 because the model gives float32 and the page must agree with
  agent.sampling within 1e-6;
- the grammar's mask A(s_t), one bit per token (6 KB), only while a constraint is on;
- the session's u, and the grammar's state for the constraint readout;
- on an inference engine (app.py --engine), the engine's note: K, the mass outside the top K
  (one bar), and where the trace over the K tokens is approximate (agent.llm.engine).

Token display strings go once per page load, as a static JSON file named by its content's hash
(`token_asset`), so a browser keeps it between positions and reloads. This module only packs
values; it computes no probability and knows nothing of Gradio.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import numpy as np


def pack_logits(logits: np.ndarray) -> str:
    """(V,) float32 logits as base64 of their little-endian bytes.

    >>> pack_logits(np.array([0.0, -np.inf], dtype=np.float32))
    'AAAAAAAAgP8='
    """
    return base64.b64encode(np.asarray(logits, dtype="<f4").tobytes()).decode("ascii")


def pack_mask(mask: np.ndarray | None) -> str | None:
    """A bool mask as base64 of its bits, token i at bit i % 8 of byte i // 8; None stays None.

    >>> pack_mask(np.array([True, False, False, True]))
    'CQ=='
    """
    if mask is None:
        return None
    return base64.b64encode(np.packbits(np.asarray(mask, dtype=bool), bitorder="little").tobytes()).decode()


def grammar_readout(c) -> dict | None:
    """The grammar's state as the constraint readout shows it; None without a constraint."""
    if c.grammar is None:
        return None
    s = c.grammar_state
    status = (
        "complete — only end-of-sequence may follow" if s.stopped
        else "complete, may continue" if s.accepting else "incomplete"
    )
    return {"name": s.grammar_name, "text": s.text, "status": status, "forced": s.forced_text or "",
            "error": s.error or ""}


def position(c, vocab_size: int, engine: dict | None = None) -> dict:
    """One Continuation's next step, for the page (see the module docstring). `engine`: on an
    inference engine, what agent.llm.engine says of the position (K, the mass outside the top K,
    where the trace is approximate); the logits are then -inf outside the K tokens."""
    out = {
        "logits": pack_logits(c.logits),
        "mask": pack_mask(c.mask),
        "u": c.u,
        "vocab": int(vocab_size),
        "truncated": int(c.truncated),
        "constraint": grammar_readout(c),
        "step": f"{c.seed}:{c.draws}:{len(c.ids)}",
    }
    return {**out, "engine": engine} if engine is not None else out


def own_numbers(logits: np.ndarray, u: float) -> dict:
    """Typed numbers as a position of their own: tokens named #1, #2, … in the page."""
    return {"logits": pack_logits(logits), "mask": None, "u": u, "vocab": int(len(logits)), "truncated": 0,
            "constraint": None, "names": "numbered", "step": "own"}


def token_asset(token_strings, special_ids, folder: str | os.PathLike) -> Path:
    """Write the display strings once as tokens-<hash>.json in `folder`; the same content, the same file."""
    body = json.dumps({"strings": list(token_strings), "special": sorted(int(i) for i in special_ids)},
                      ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    path = Path(folder) / f"tokens-{hashlib.sha256(body).hexdigest()[:16]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(body)
        tmp.replace(path)
    return path
