"""The Sampling and Speculative tabs on an inference engine: next-token distributions from a server's logprobs.

The lecture's pipeline (Part I) is "previous tokens → Transformer → logits → softmax → sample". On
an engine the Transformer runs on the server, which sends only its top K tokens with their
log-probabilities (OpenAI's legacy `logprobs=K` of POST /v1/completions: llama-cpp-python's
server, vLLM, llama.cpp's llama-server). The page then runs its trace over those K tokens, and
the rest of the mass, 1 - sum of the K probabilities, is one "outside the top K" bar.

The server samples nothing the page did not choose: each request asks for ONE position (max_tokens
1 at temperature 0: whatever the server would emit is thrown away), and the page's chosen token is
appended on the page's side and sent with the next request.

What it knows:
  Engine        the operator's server (app.py's --engine: a URL or a --remote label; never a
                visitor's choice), its model name and K.
  EngineModel   the local model's tokenizer with the engine's distribution: next_token_logits(ids)
                → (V,) float32 with log P for the K tokens the server named and -inf elsewhere (so
                agent.sampling's trace runs over exactly those K), plus `engine_view` for the page;
                for the Speculative tab's target, tail_logits(ids, n) (the last n positions from one
                echoed request) and plain_decode_seconds (the engine decoding alone).
  request_body, top_of, names_to_ids, dense
                the wire format, each a small function: token ids as the prompt where the server
                takes them (vLLM, llama-server), else the text (llama-cpp-python's server; the
                page then says whether that text tokenizes back to the same ids); keys named
                "token_id:N" (vLLM's return_tokens_as_token_ids), by id (llama-server) or by the
                token's text (llama-cpp-python), mapped back through the local vocabulary.
  Every request goes through agent.llm.remote's guard: bounded in bytes and wall-clock time.

What it does not know: the page, the sampling stages (agent.sampling), or Gradio.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agent.backends import BackendError
from agent.llm import remote
from agent.llm.server_info import window_from_models, window_from_props
from agent.parameters import checked_token_ids

DEFAULT_TOP_K = 20  # vLLM's default max_logprobs
MAX_TOP_K = 100
REQUEST_S = 30.0  # one position: a prompt pass on a busy server
ASSUMED_WINDOW = 2048  # llama-cpp-python's default n_ctx, when the server does not say its own
CACHE_POSITIONS = 4096  # (session, ids) → the K named logprobs: a Back press asks no server
MAX_KEY_CHARS = 256
CHECK_PROMPT = "The capital of France is"


class EngineError(BackendError):
    """The engine could not give a position; the message is for the page and never holds reply bytes."""


@dataclass(frozen=True)
class Engine:
    """The operator's server: base URL, model name ("" = the one it lists first), K."""

    base_url: str
    model: str = ""
    top_k: int = DEFAULT_TOP_K
    label: str = ""
    api_key: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or not 1 <= self.top_k <= MAX_TOP_K:
            raise EngineError(f"--engine-top-k is a whole number from 1 to {MAX_TOP_K}, got {self.top_k!r}")
        remote.split_url(self.base_url)


def engine_for(value: str, model: str = "", top_k: int = DEFAULT_TOP_K) -> Engine:
    """--engine's value: a --remote label (that server) or a URL.

    >>> engine_for("http://127.0.0.1:8080/v1", top_k=5).top_k
    5
    """
    value = str(value).strip()
    listed = next((s for s in remote.servers() if value in (s.label, s.base_url)), None)
    if listed is not None:
        return Engine(listed.base_url, model, top_k, listed.label, listed.api_key)
    _, host, port, _ = remote.split_url(value)
    return Engine(value, model, top_k, f"{host}:{port}")


# --- the wire format -------------------------------------------------------------------------------

def request_body(model: str, prompt: str | list[int], k: int) -> dict:
    """One position: max_tokens 1 at temperature 0 (the server's own token is discarded).

    >>> request_body("m", [1, 2], 5)["logprobs"], request_body("m", "hi", 5)["max_tokens"]
    (5, 1)
    """
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": int(k), "echo": False,
            "seed": 0, "stream": False, "return_tokens_as_token_ids": True}
    return {"model": model, **body} if model else body


def top_of(reply: object) -> list[tuple[object, float]] | None:
    """The (key, logprob) pairs of the reply's first position, or None when it has none
    (llama-cpp-python names none when its own greedy token ended the text). Keys are ints
    (llama-server's ids) or strings.

    >>> top_of({"choices": [{"logprobs": {"top_logprobs": [{" Paris": -0.26, " the": -2.1}]}}]})
    [(' Paris', -0.26), (' the', -2.1)]
    >>> top_of({"choices": [{"logprobs": {"content": [{"top_logprobs": [{"id": 7, "token": "a", "logprob": -1.0}]}]}}]})
    [(7, -1.0)]
    """
    return next((t for t in positions(reply) if t is not None), None)


def names_to_ids(pairs: Sequence[tuple[object, float]], names: dict[str, int | None],
                 vocab_size: int) -> tuple[dict[int, float], float]:
    """({token id: logprob}, the probability of keys that name no single token).

    A key is an id (an int, or "token_id:N"), or a token's text looked up in `names` (the local
    vocabulary, as the server spells it: None where several tokens share the text, e.g. the
    special tokens, which llama-cpp-python names ""). Logprobs must be finite and at most 0.

    >>> names_to_ids([("token_id:5", -0.1), ("", -3.0), (" Paris", -1.0)], {" Paris": 9, "": None}, 10)[0]
    {5: -0.1, 9: -1.0}
    """
    ids: dict[int, float] = {}
    unnamed = 0.0
    for key, logprob in pairs[: MAX_TOP_K + 1]:
        if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or not math.isfinite(logprob) \
                or logprob > 1e-3:
            raise EngineError("the engine sent a logprob that is not a finite number at most 0")
        token = _token_id(key, names)
        if token is None or not 0 <= token < vocab_size:
            unnamed += math.exp(min(0.0, logprob))
        else:
            ids[token] = min(0.0, float(logprob))
    if not ids:
        raise EngineError("the engine named none of its top tokens in the local vocabulary: is it serving "
                          "the local model's tokenizer?")
    return ids, unnamed


def _token_id(key: object, names: dict[str, int | None]) -> int | None:
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
        return None
    if key.startswith("token_id:") and key[9:].isdigit():
        return int(key[9:])
    return names.get(key)


def dense(ids: dict[int, float], vocab_size: int) -> np.ndarray:
    """(V,) float32 logits: log P for the named tokens, -inf elsewhere (the trace's support).

    >>> dense({1: -0.5}, 3).tolist()
    [-inf, -0.5, -inf]
    """
    z = np.full(vocab_size, -np.inf, dtype=np.float32)
    z[list(ids)] = list(ids.values())
    return z


def unique_names(names: Sequence[str]) -> dict[str, int | None]:
    """Text → token id, None for a text that several tokens share.

    >>> unique_names(["a", "", "b", ""])
    {'a': 0, '': None, 'b': 2}
    """
    out: dict[str, int | None] = {}
    for i, name in enumerate(names):
        out[name] = None if name in out else i
    return out


def positions(reply: object) -> list[list[tuple[object, float]] | None]:
    """Every position's (key, logprob) pairs in a reply, None where the server left one out (an
    echoed prompt's first token). llama-server and the chat form: a list of entries with `top_logprobs`
    lists; the legacy form: a list of {key: logprob}.

    >>> positions({"choices": [{"logprobs": {"top_logprobs": [None, {"a": -0.1}]}}]})
    [None, [('a', -0.1)]]
    """
    try:
        logprobs = reply["choices"][0]["logprobs"]
    except (KeyError, IndexError, TypeError):
        raise EngineError("the engine's reply has no choices[0].logprobs") from None
    if not isinstance(logprobs, dict):
        raise EngineError("the engine sent no logprobs: it may not support them (llama-cpp-python's "
                          "server needs logits_all; vLLM caps K at its --max-logprobs)")
    if isinstance(logprobs.get("content"), list):
        return [_entry_pairs(e.get("top_logprobs") if isinstance(e, dict) else None) for e in logprobs["content"]]
    raw = logprobs.get("top_logprobs")
    return [list(t.items()) if isinstance(t, dict) else None for t in raw] if isinstance(raw, list) else []


def _entry_pairs(entries: object) -> list[tuple[object, float]] | None:
    if not isinstance(entries, list):
        return None
    return [(e.get("id", e.get("token")), e.get("logprob")) for e in entries if isinstance(e, dict)]


# --- the model the Sampling tab sees ---------------------------------------------------------------

@dataclass(frozen=True)
class Position:
    """One position as the engine gave it."""

    named: dict  # token id → logprob, the K (or K + 1) tokens the server named
    unnamed: float  # probability under keys that name no single local token
    exact: bool  # the server read exactly the page's token ids
    via: str  # "token ids", "text", "text, asked again"


class EngineModel:
    """The local model's tokenizer and vocabulary, with the next-token distribution of an engine.

    Everything the Sampling tab reads that is not overridden here (encode, token_strings,
    apply_chat_template, …) is the local model's: the engine must serve a model with the same
    tokenizer (`connect` checks that the server's top tokens are named in the local vocabulary).
    """

    def __init__(self, local, engine: Engine, model: str, window: int, window_from: str):
        self.local, self.engine, self.served_model = local, engine, model
        self.window, self.window_from = int(window), window_from
        self.url = remote.api_base(engine.base_url) + "/completions"
        self.names = unique_names(local.server_names)
        self.prompt_as = "ids"
        self.echo: str | None = None  # how echoed entries line up (echo_alignment), None: not used
        self._newline = local.encode("\n")[-1]  # appended where an echo leaves out the last position
        self._positions: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __getattr__(self, name: str):
        if name == "local":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.local, name)

    @property
    def context_window(self) -> int:
        return min(self.window, self.local.context_window)

    @property
    def weights_choices(self) -> tuple[str, ...]:
        return ("base",)

    def checked_weights(self, weights: str) -> str:
        if weights != "base":
            raise ValueError(f"Unknown Local weights {weights!r}: on an engine the weights are the server's.")
        return weights

    @property
    def header(self) -> dict[str, str]:
        e, served = self.engine, self.served_model.rsplit("/", 1)[-1]
        return {**self.local.header, "Sampling tab": f"top {e.top_k} of engine {e.label} ({served})",
                "engine window": f"{self.context_window:,} ({self.window_from})",
                "Speculative decoding": f"target: engine {e.label}, top {e.top_k}; drafts: the local model",
                "ReAct tab": "the local model"}

    def share_prefix(self, token_ids: Sequence[int], weights: str = "base") -> None:
        """Nothing to share: the engine keeps its own cache."""

    def next_token_logits(self, token_ids: Sequence[int], session=None, cancel=None,
                          weights: str = "base") -> np.ndarray:
        """(V,) float32: log P of the K tokens the engine named, -inf elsewhere."""
        return dense(self.position(token_ids, session, weights).named, self.vocab_size)

    def position(self, token_ids: Sequence[int], session=None, weights: str = "base") -> Position:
        """The engine's position after token_ids, remembered per (session, ids)."""
        ids = self._checked(token_ids)
        self.checked_weights(weights)
        from agent.llm.batching import current_session

        key = (current_session() if session is None else session, ids)
        with self._lock:
            hit = self._positions.get(key)
            if hit is not None:
                self._positions.move_to_end(key)
                return hit
        pos = self._ask(ids)
        with self._lock:
            self._positions[key] = pos
            while len(self._positions) > CACHE_POSITIONS:
                self._positions.popitem(last=False)
        return pos

    # --- the Speculative tab's target --------------------------------------------------------

    def tail_logits(self, token_ids: Sequence[int], n: int, session=None) -> np.ndarray:
        """(n, V): the engine's top-K logits after each of the last n positions of token_ids — the
        verification of n − 1 drafted tokens plus the bonus position. ONE request where the server
        echoes the prompt with its logprobs (llama-cpp-python with logits_all, vLLM): the server's
        one pass over the drafted tokens; else one request per position."""
        ids = self._checked(token_ids)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= len(ids):
            raise ValueError(f"n must be between 1 and {len(ids)}, got {n}.")
        rows = self._echoed(ids, int(n)) if n > 1 else None
        if rows is None:
            rows = [self.position(ids[:len(ids) - n + 1 + i], session).named for i in range(n)]
        return np.stack([dense(r, self.vocab_size) for r in rows])

    def _echoed(self, ids: tuple[int, ...], n: int) -> list[dict[int, float]] | None:
        """The last n positions from one echoed request, or None where the server cannot give them
        (no echo found at start, a text that tokenizes to other ids, a position left out).

        Where echo is "aligned" (OpenAI's form), entry i is the position after the prompt's first i
        tokens, so a newline is appended for the position after `ids`; llama-cpp-python 0.3.36's
        entries are "shifted": entry i is the position after the first i + 1 (measured at start by
        `echo_alignment`). Each entry keeps the server's top K only: an echoed entry also names the
        prompt's own token there, which a plain position would not."""
        if self.echo is None:
            return None
        shift = 1 if self.echo == "shifted" else 0
        sent = ids if shift else ids + (self._newline,)
        found = self._echo(sent)
        wanted = found[len(ids) - n + 1 - shift:len(ids) + 1 - shift] if found is not None else []
        if len(wanted) != n or any(p is None for p in wanted):
            return None
        return [self._top_k_named(pairs) for pairs in wanted]

    def _echo(self, sent: tuple[int, ...]) -> list | None:
        """Every echoed entry of one request for `sent`, or None (a text that reads as other ids, no echo)."""
        prompt, exact = self._prompt_of(sent)
        if not exact:
            return None
        try:
            found = positions(self._post({**request_body(self.served_model, prompt, self.engine.top_k), "echo": True}))
        except EngineError:
            return None
        return found if len(found) >= len(sent) else None

    def echo_alignment(self, ids: tuple[int, ...], after: Position) -> str | None:
        """How the server's echoed entries line up with positions, found against `after` (the plain
        position after ids): "aligned", "shifted", or None (no usable echo: one request per position)."""
        found = self._echo(ids + (self._newline,))
        top = max(after.named, key=after.named.get)
        for name, i in (("aligned", len(ids)), ("shifted", len(ids) - 1)):
            pairs = found[i] if found is not None and i < len(found) else None
            if pairs:
                named = self._top_k_named(pairs)
                if max(named, key=named.get) == top and len(set(named) & set(after.named)) >= 0.8 * len(after.named):
                    return name
        return None

    def _top_k_named(self, pairs: list) -> dict[int, float]:
        """An echoed entry as a plain position names it: the server's top K only (an echoed entry
        also names the prompt's own token there), by local token id."""
        return names_to_ids(sorted(pairs, key=_logprob_first)[:self.engine.top_k], self.names, self.vocab_size)[0]

    def _prompt_of(self, ids: tuple[int, ...]) -> tuple[list[int] | str, bool]:
        """What a request sends for `ids` (the ids, or their text where the server takes text only),
        and whether the server reads exactly those ids back."""
        if self.prompt_as == "ids":
            return list(ids), True
        text = self.local.decode(ids)
        return text, tuple(self.local.encode(text)) == ids

    def plain_decode_seconds(self, prompt_ids: Sequence[int], continuation: Sequence[int], session=None) -> float:
        """Seconds the engine takes to decode len(continuation) tokens itself, in one greedy request
        (its own batching and cache, no round trip per token): the plain baseline of a speculative
        run whose target is this engine."""
        prompt, _ = self._prompt_of(self._checked(prompt_ids))
        body = {**request_body(self.served_model, prompt, 1), "max_tokens": max(1, len(continuation)),
                "logprobs": None}
        start = time.perf_counter()
        self._post(body, REQUEST_S * 4)
        return time.perf_counter() - start

    def _checked(self, token_ids: Sequence[int]) -> tuple[int, ...]:
        return checked_token_ids(token_ids, self.context_window, self.vocab_size, "the engine's window")

    def _ask(self, ids: tuple[int, ...]) -> Position:
        prompt, exact = self._prompt_of(ids)
        pairs, via = top_of(self._post(request_body(self.served_model, prompt, self.engine.top_k))), self.prompt_as
        if pairs is None:
            pairs, via = self._again_without_end(prompt), f"{via}, asked again"
        named, unnamed = names_to_ids(pairs, self.names, self.vocab_size)
        if sum(math.exp(v) for v in named.values()) + unnamed > 1.001:
            raise EngineError("the engine's top probabilities sum above 1: they are not log-probabilities")
        return Position(named, unnamed, exact, "token ids" if via == "ids" else via)

    def _again_without_end(self, prompt) -> list:
        """The position asked again with the end tokens biased away from the server's own draw:
        llama-cpp-python names no position when its greedy token ends the text (an end of turn).
        Its logit_bias acts on its sampler only; the logprobs come from the raw logits."""
        if self.prompt_as == "ids":
            raise EngineError("the engine sent no distribution here (its own greedy token ended the text)")
        body = {**request_body(self.served_model, prompt, self.engine.top_k),
                "logit_bias": {str(i): -100.0 for i in sorted(self.local.eos_token_ids)}}
        pairs = top_of(self._post(body))
        if pairs is None:
            raise EngineError("the engine sent no distribution here, even with its end tokens biased away")
        return pairs

    def _post(self, body: dict, budget_s: float = REQUEST_S) -> object:
        target = remote.check_url(self.url, remote.ANY)  # the operator's server: any address
        raw = remote.fetch(target, "POST", json.dumps(body).encode(), _headers(self.engine.api_key), budget_s)
        try:
            return json.loads(raw)
        except ValueError:
            raise EngineError(f"the engine at {target.url} answered with no JSON") from None

    def engine_view(self, ids: Sequence[int], logits: np.ndarray) -> dict:
        """What the page shows about this position beside the trace (viz/position.py sends it)."""
        from agent.llm.batching import current_session

        with self._lock:
            pos = self._positions.get((current_session(), tuple(int(i) for i in ids)))
        finite = np.isfinite(logits)
        received = float(np.exp(logits[finite].astype(np.float64)).sum())
        named = int(finite.sum())  # K, less the keys that name no single local token
        return {"k": self.engine.top_k, "outside": max(0.0, 1.0 - received), "server": self.engine.label,
                "note": note(self.engine.label, self.engine.top_k, received, self.vocab_size, pos, named)}


def note(label: str, k: int, received: float, vocab_size: int, pos: Position | None, named: int | None = None) -> str:
    """Where the trace over the engine's K tokens is exact and where approximate (for the page);
    `named`: how many of the K the trace holds (a special token named "" is outside), default K.

    >>> note("gpu", 20, 0.9, 100, None)[:62]
    'The engine (gpu) sent its top 20 tokens, 90.0% of P; the other'
    >>> note("gpu", 20, 0.9, 100, None, 19)[62:129]
    ' 81 tokens (10.0%) are one bar outside the top K, not in the trace.'
    """
    n = k if named is None else named
    text = (f"The engine ({label}) sent its top {k} tokens, {100 * received:.1f}% of P; the other {vocab_size - n:,} "
            f"tokens ({100 * max(0.0, 1 - received):.1f}%) are one bar outside the top K, not in the trace. "
            f"Every stage runs over these {n} tokens renormalised, so each P is P / {100 * received:.1f}%. "
            f"Exact: the tokens' order, greedy, top-k up to k = {n}, and the mask among the K. "
            "Approximate against the whole vocabulary: temperature (T ≠ 1 moves mass between the K and "
            f"the tail) and top-p (a p above {100 * received:.1f}% would reach into the tail), and so min-p "
            "and the draw after them.")
    if pos is not None and pos.unnamed > 0:
        text += (f" {100 * pos.unnamed:.2f}% came under names several tokens share (llama-cpp-python "
                 "names special tokens \"\") and is counted outside.")
    if pos is not None and pos.via != "token ids":
        text += " The server takes text, not token ids: this position is after the text of the page's tokens"
        text += "." if pos.exact else ", which the server reads as other tokens, so it is approximate."
    return text


def _logprob_first(pair: tuple[object, object]) -> float:
    """Sort key: the largest logprob first (a value that is no number last: names_to_ids refuses it)."""
    value = pair[1]
    return -float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _headers(api_key: str | None) -> dict:
    headers = {"Content-Type": "application/json", "Accept": "application/json", "Connection": "close"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


# --- at start ------------------------------------------------------------------------------------

def connect(local, engine: Engine, window: int | None = None) -> EngineModel:
    """Ask the engine once, at start: its model and window, whether it takes token ids as a prompt
    (llama-cpp-python's server refuses them: the text then), and whether its top tokens are named
    in the local vocabulary. Raises BackendError (EngineError, RemoteRefused) saying what failed."""
    v1 = remote.api_base(engine.base_url)
    listing = remote._get_json(v1 + "/models", engine.api_key, remote.ANY)
    model = engine.model or _first_model(listing)
    found = ((window_from_props(remote._get_json(v1.removesuffix("/v1") + "/props", engine.api_key, remote.ANY)),
              "/props n_ctx"), (window_from_models(listing, model), "/v1/models max_model_len"),
             (window, "operator setting"), (ASSUMED_WINDOW, "assumed: the server does not say"))
    n, window_from = next((n, where) for n, where in found if n)
    lm = EngineModel(local, engine, model, n, window_from)
    ids = tuple(local.encode(CHECK_PROMPT))
    try:
        pos = lm._ask(ids)
    except BackendError:
        lm.prompt_as = "text"
        pos = lm._ask(ids)
    lm.echo = lm.echo_alignment(ids, pos)
    named = sum(math.exp(v) for v in pos.named.values())
    if named < 0.5 * (named + pos.unnamed):
        raise EngineError(f"the engine named most of its top tokens outside the local vocabulary: it must serve "
                          f"a model with the local tokenizer ({local.name}); pass --model for another")
    return lm


def _first_model(listing: object) -> str:
    data = listing.get("data") if isinstance(listing, dict) else None
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    return str(first.get("id") or "")[:200]
