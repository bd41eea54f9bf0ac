"""The one way out of the server: an OpenAI-compatible backend, and the guard every outgoing request
passes (this backend's, and any later one's: MCP over HTTP, anything the server fetches).

What it knows:
  which servers the operator allowed (`configure`, called once by app.py: `--remote`), whether a
  visitor may type a free URL (local mode, or the operator's `--allow-any-remote`), and the guard:
    check_url      http/https only, no user:password@, the host resolved (bounded in time) and every
                   address it resolves to checked: loopback, private, link-local, CGNAT, multicast,
                   unspecified, reserved, cloud metadata and IPv4-mapped IPv6 are refused in every
                   spelling (127.1, 2130706433, 0x7f.0.0.1, [::1], localhost …) unless allowed.
    open_request   connects to the address that was checked (no DNS-rebinding gap), follows no
                   redirect (a 3xx is an error), and closes the socket when the whole request's
                   wall-clock budget is spent, whatever the server drips.
    read_capped / lines   at most MAX_REPLY_BYTES of reply, within the same budget.
  OpenAIBackend POSTs {base}/v1/chat/completions with "stream": true (and, with tools, a tool_choice:
  agent.llm.server_info.tool_choice) and assembles the server-sent events (content and index-keyed
  tool_call deltas, a name repeated in every chunk taken once, the usage chunk); on_token gets only
  new text. A stream that ends before a finish_reason or [DONE] is a cut reply, an error.
  No error message ever holds bytes of a reply body.
  probe / server_info: what a server says about itself (llama.cpp's GET /props, vLLM's
  GET /v1/models) → agent.llm.server_info.ServerInfo, remembered a few minutes per (server, model).

What it does not know: the loop, the page, or how tools run.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from agent.backends import BackendError, BackendReply, OnToken, Settings, observed
from agent.budget import Usage
from agent.llm.server_info import (
    MAX_MODELS,
    ServerInfo,
    is_llama_cpp_python,
    streams,
    tool_choice,
    window_from_models,
    window_from_props,
)
from agent.messages import ToolCall
from agent.template import Prompt, stop_sequences, wire_messages

MAX_REPLY_BYTES = 1_000_000  # the whole reply, stream included
MAX_URL_CHARS = 500
RESOLVE_TIMEOUT_S = 3.0

# --- the guard -----------------------------------------------------------------------------------

METADATA = frozenset(map(ipaddress.ip_address, ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")))
CGNAT = ipaddress.ip_network("100.64.0.0/10")
ANY = frozenset({"loopback", "private", "link-local", "CGNAT", "multicast", "unspecified", "reserved",
                 "cloud metadata", "IPv4-mapped IPv6", "not public"})
LOCAL = frozenset({"loopback", "private", "CGNAT"})  # local mode's free URL: a local Ollama, the LAN
PUBLIC = frozenset()  # everyone else: public addresses only


class RemoteRefused(BackendError):
    """The guard refused a request; the message says why and never echoes a reply body."""


class ConnectionLost(RemoteRefused):
    """The connection failed while a reply was read (neither the time budget nor the byte cap)."""


def address_kind(ip: str) -> str | None:
    """The refused category of an address, or None for a public one.

    >>> [address_kind(a) for a in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::ffff:127.0.0.1", "8.8.8.8")]
    ['loopback', 'private', 'cloud metadata', 'IPv4-mapped IPv6', None]
    """
    a = ipaddress.ip_address(ip.split("%")[0])
    checks = (
        ("cloud metadata", a in METADATA),
        ("IPv4-mapped IPv6", getattr(a, "ipv4_mapped", None) is not None),
        ("unspecified", a.is_unspecified), ("loopback", a.is_loopback),
        ("link-local", a.is_link_local), ("multicast", a.is_multicast),
        ("CGNAT", a.version == 4 and a in CGNAT), ("reserved", a.is_reserved),
        ("private", a.is_private), ("not public", not a.is_global))
    return next((name for name, hit in checks if hit), None)


@dataclass(frozen=True)
class Target:
    """A checked URL: where to connect (`address`) and what to ask for (`host`, `path`)."""

    scheme: str
    host: str
    port: int
    path: str
    address: str

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}{self.path}"


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path?query) of an http(s) URL; RemoteRefused for anything else.

    >>> split_url("http://127.1:8080/v1?x=1")
    ('http', '127.1', 8080, '/v1?x=1')
    """
    if not isinstance(url, str) or not url.strip() or len(url) > MAX_URL_CHARS:
        raise RemoteRefused(f"a server URL is an http(s) URL of at most {MAX_URL_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise RemoteRefused(f"not a URL: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise RemoteRefused("only http:// and https:// servers can be reached")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise RemoteRefused("a server URL may not hold user:password@")
    if not parts.hostname:
        raise RemoteRefused("the server URL has no host")
    return parts.scheme, parts.hostname, port, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="remote-resolve")


def resolve(host: str, port: int, timeout_s: float = RESOLVE_TIMEOUT_S) -> tuple[str, ...]:
    """Every address `host` resolves to (numbers in any spelling included), within timeout_s."""
    job = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = job.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise RemoteRefused(f"{host} did not resolve within {timeout_s:g} s") from None
    except (OSError, UnicodeError) as e:
        raise RemoteRefused(f"cannot resolve {host}: {e.__class__.__name__}") from None
    return tuple(dict.fromkeys(info[4][0] for info in infos))


def check_url(url: str, allow: frozenset[str] = PUBLIC) -> Target:
    """The URL parsed and its host resolved; RemoteRefused unless every address is allowed.

    >>> check_url("http://0x7f.0.0.1/v1")
    Traceback (most recent call last):
    ...
    agent.llm.remote.RemoteRefused: http://0x7f.0.0.1/v1 resolves to 127.0.0.1, a loopback address: refused
    """
    scheme, host, port, path = split_url(url)
    addresses = resolve(host, port)
    for a in addresses:
        kind = address_kind(a)
        if kind is not None and kind not in allow:
            raise RemoteRefused(f"{url} resolves to {a}, a{'n' * (kind[0] in 'aeiouIU')} {kind} address: refused")
    if not addresses:
        raise RemoteRefused(f"{host} resolves to no address")
    return Target(scheme, host, port, path, addresses[0])


class _PinnedConnection(http.client.HTTPSConnection):
    """An HTTP(S) connection to the checked address; Host header and TLS name stay the URL's host."""

    def __init__(self, target: Target, timeout_s: float):
        super().__init__(target.host, target.port, timeout=timeout_s)
        self.target, self.raw = target, None  # raw: kept after http.client hands the socket on

    def connect(self) -> None:
        sock = socket.create_connection((self.target.address, self.target.port), self.timeout)
        if self.target.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.target.host)
        self.sock = self.raw = sock


@dataclass
class Exchange:
    """One request in flight: its response, its deadline; closing it closes the socket."""

    target: Target
    response: http.client.HTTPResponse
    deadline: float
    conn: _PinnedConnection
    watchdog: threading.Timer
    received: int = 0
    expired: bool = field(default=False)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.expired = True
            raise RemoteRefused(f"{self.target.url} did not finish within its time budget (timed out)")
        return left

    def close(self) -> None:
        self.watchdog.cancel()
        _shut(self.conn)
        self.response.close()


def _shut(conn: _PinnedConnection) -> None:
    """Shut the socket down (a blocked read returns at once) and close it."""
    sock = conn.raw
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()  # the real close waits for the response's file, which Exchange.close closes
    conn.close()


def open_request(target: Target, method: str, body: bytes | None, headers: dict, budget_s: float) -> Exchange:
    """Send one request to the checked address and read the status line; the socket is shut when
    budget_s has passed (a watchdog), so nothing a server drips outlives the budget."""
    deadline = time.monotonic() + budget_s
    conn = _PinnedConnection(target, max(0.05, min(budget_s, 10.0)))
    watchdog = threading.Timer(budget_s, _shut, (conn,))
    watchdog.daemon = True
    watchdog.start()
    try:
        conn.request(method, target.path, body=body, headers=headers)
        response = conn.getresponse()
    except BaseException as e:
        watchdog.cancel()
        _shut(conn)
        if time.monotonic() >= deadline or isinstance(e, TimeoutError):
            raise RemoteRefused(f"no reply from {target.url} within {budget_s:g} s (timed out)") from None
        if isinstance(e, ConnectionRefusedError):
            raise RemoteRefused(f"cannot reach {target.url}: connection refused") from None
        raise RemoteRefused(f"cannot reach {target.url}: {e.__class__.__name__}") from None
    ex = Exchange(target, response, deadline, conn, watchdog)
    if 300 <= response.status < 400:
        ex.close()
        raise RemoteRefused(f"{target.url} answered HTTP {response.status} (a redirect): redirects are not followed")
    if response.status >= 400:
        ex.close()
        raise RemoteRefused(f"{target.url} answered HTTP {response.status} {response.reason[:60]}")
    return ex


def _guarded(ex: Exchange, read):
    """read() within the budget and the byte cap; errors say why, never what was read."""
    left = ex.remaining()
    if ex.conn.raw is not None:
        ex.conn.raw.settimeout(min(left, 10.0))
    try:
        data = read()
    except (OSError, http.client.HTTPException, ValueError) as e:
        if time.monotonic() >= ex.deadline or isinstance(e, TimeoutError):
            raise RemoteRefused(f"{ex.target.url} did not finish within its time budget (timed out)") from None
        raise ConnectionLost(f"the connection to {ex.target.url} failed: {e.__class__.__name__}") from None
    ex.received += len(data)
    if ex.received > MAX_REPLY_BYTES:
        raise RemoteRefused(f"the reply from {ex.target.url} is over {MAX_REPLY_BYTES:,} bytes: cut off")
    if time.monotonic() >= ex.deadline:
        ex.remaining()
    return data


def read_capped(ex: Exchange) -> bytes:
    """The whole body, at most MAX_REPLY_BYTES, within the budget."""
    parts = []
    while chunk := _guarded(ex, lambda: ex.response.read1(65536)):
        parts.append(chunk)
    return b"".join(parts)


def lines(ex: Exchange) -> Iterator[bytes]:
    """The body line by line (server-sent events), within the byte cap and the budget."""
    while line := _guarded(ex, lambda: ex.response.readline(MAX_REPLY_BYTES - ex.received + 1)):
        yield line


def fetch(target: Target, method: str, body: bytes | None, headers: dict, budget_s: float) -> bytes:
    """One whole guarded request → its body."""
    ex = open_request(target, method, body, headers, budget_s)
    try:
        return read_capped(ex)
    finally:
        ex.close()


# --- which servers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Server:
    """A server the operator allowed (`--remote`); its addresses are trusted, whatever they are."""

    label: str
    base_url: str
    api_key: str | None = None


_config: dict = {"servers": (), "free_url": False, "free_allow": PUBLIC, "window": None}


def parse_server(entry: str) -> Server:
    """`URL` or `label=URL` → Server (the label defaults to host:port).

    >>> parse_server("ollama=http://127.0.0.1:11434/v1")
    Server(label='ollama', base_url='http://127.0.0.1:11434/v1', api_key=None)
    >>> parse_server("http://10.0.0.5:8000").label
    '10.0.0.5:8000'
    """
    entry = entry.strip()
    label, sep, url = entry.partition("=")
    if not sep or "://" in label:
        label, url = "", entry
    _, host, port, _ = split_url(url)
    return Server(label.strip() or f"{host}:{port}", url.strip())


def configure(servers: Sequence[str], free_url: bool, *, free_url_private: bool = False,
              context_window: int | None = None) -> None:
    """The operator's choice, once at start: the allowed servers (each `URL` or `label=URL`), whether
    a visitor may type a URL, whether such a URL may be loopback/private (local mode only), and the
    context window of a server whose model info does not say (`--remote-context`)."""
    parsed = tuple(parse_server(s) for s in servers if s.strip())
    if context_window is not None and not 256 <= int(context_window) <= 10_000_000:
        raise RemoteRefused(f"a server's context window is 256 to 10,000,000 tokens, got {context_window}")
    _config.update(servers=parsed, free_url=bool(free_url), free_allow=LOCAL if free_url_private else PUBLIC,
                   window=None if context_window is None else int(context_window))


def servers() -> tuple[Server, ...]:
    return _config["servers"]


def free_url_allowed() -> bool:
    return _config["free_url"]


def _where(server: str) -> tuple[str, str | None, frozenset[str]]:
    """(base URL, api key, allowed address kinds) for a label or, where allowed, a free URL."""
    for s in servers():
        if server in (s.label, s.base_url):
            return s.base_url, s.api_key, ANY
    if not free_url_allowed():
        names = ", ".join(s.label for s in servers()) or "none"
        raise RemoteRefused(f"this server only connects to the servers its operator listed ({names})")
    split_url(server)
    return server, None, _config["free_allow"]


def backend_for(server: str, model: str, tokenizer=None, *, probe: bool = False) -> OpenAIBackend:
    """The backend for a listed server's label, or a URL when free URLs are allowed. `tokenizer`:
    the served model's, where the lab has it (counts without a usage chunk are then exact). probe:
    ask the server for its kind and window first (`server_info`); else the operator's window."""
    if not isinstance(model, str) or not model.strip() or len(model) > 200:
        raise RemoteRefused("a server model name has 1 to 200 characters")
    base, key, allow = _where(str(server).strip())
    info = server_info(server, model.strip()) if probe else known_info(server, model.strip())
    return OpenAIBackend(base, model.strip(), key, info.context_window, tokenizer, allow=allow, info=info)


# --- what a server says about itself ---------------------------------------------------------------

PROBE_S = 3.0
INFO_TTL_S = 300.0


_infos: dict[tuple[str, str], tuple[float, ServerInfo]] = {}


def _get_json(url: str, key: str | None, allow: frozenset[str]) -> object:
    """GET url → parsed JSON, or None for any failure (a probe never stops a run)."""
    try:
        return json.loads(fetch(check_url(url, allow), "GET", None, _headers(key), PROBE_S))
    except (BackendError, ValueError):
        return None


def probe(server: str, model: str) -> ServerInfo:
    """Ask the server: llama.cpp answers GET /props (n_ctx), vLLM lists max_model_len in /v1/models,
    llama-cpp-python's server names itself in /openapi.json (its window is the operator's);
    anything else is "unknown" with the operator's window (--remote-context), if any."""
    base, key, allow = _where(str(server).strip())
    v1 = api_base(base)
    n = window_from_props(_get_json(v1.removesuffix("/v1") + "/props", key, allow))
    if n:
        return ServerInfo("llama.cpp", n, "/props n_ctx")
    n = window_from_models(_get_json(v1 + "/models", key, allow), model)
    if n:
        return ServerInfo("vLLM", n, "/v1/models max_model_len")
    if is_llama_cpp_python(_get_json(v1.removesuffix("/v1") + "/openapi.json", key, allow)):
        return replace(_operator_info(), kind="llama-cpp-python")
    return _operator_info()


def _operator_info() -> ServerInfo:
    window = _config["window"]
    return ServerInfo("unknown", window, "operator setting" if window else "")


def _recent(server: str, model: str) -> ServerInfo | None:
    hit = _infos.get((str(server).strip(), model))
    return hit[1] if hit is not None and time.monotonic() - hit[0] < INFO_TTL_S else None


def known_info(server: str, model: str) -> ServerInfo:
    """What is known without a request: a recent probe's answer, else the operator's window."""
    return _recent(server, model) or _operator_info()


def server_info(server: str, model: str) -> ServerInfo:
    """probe(), remembered for INFO_TTL_S per (server, model)."""
    info = _recent(server, model)
    if info is None:
        info = probe(server, model)
        _infos[(str(server).strip(), model)] = (time.monotonic(), info)
    return info


def api_base(base_url: str) -> str:
    """The URL ending in /v1.

    >>> api_base("http://h:11434/"), api_base("http://h:11434/v1")
    ('http://h:11434/v1', 'http://h:11434/v1')
    """
    base = base_url.strip().rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def list_models(server: str, timeout_s: float = 5) -> tuple[str, ...]:
    """The model ids a server lists at GET {base}/v1/models, under the same guard."""
    base, key, allow = _where(str(server).strip())
    target = check_url(api_base(base) + "/models", allow)
    raw = fetch(target, "GET", None, _headers(key), timeout_s)
    try:
        data = json.loads(raw)["data"]
        ids = tuple(str(m["id"])[:200] for m in data[:MAX_MODELS])
    except (ValueError, KeyError, TypeError, IndexError) as e:
        raise RemoteRefused(f"malformed model list from {target.url}: {e.__class__.__name__}") from None
    return ids


def _headers(api_key: str | None) -> dict:
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json",
               "Connection": "close"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


# --- the backend -----------------------------------------------------------------------------------

class OpenAIBackend:
    """POST {base}/v1/chat/completions, streamed; each call checked by the guard, bounded in bytes
    and wall-clock time (settings.timeout_s)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 context_window: int | None = None, tokenizer=None, *, allow: frozenset[str] = PUBLIC,
                 info: ServerInfo | None = None):
        self.url = api_base(base_url) + "/chat/completions"
        self.model, self.api_key, self.allow = model, api_key, allow
        self.info = info or ServerInfo("unknown", context_window)
        self.context_window, self.tokenizer = context_window, tokenizer
        self.name = f"{model} @ {api_base(base_url)}"

    def request_body(self, prompt: Prompt, settings: Settings) -> dict:
        messages, tools = wire_messages(prompt)
        body: dict = {"model": self.model, "messages": messages, "temperature": settings.temperature,
                      "top_p": settings.top_p, "max_tokens": settings.max_new_tokens,
                      "seed": settings.seed, "stream": True, "stream_options": {"include_usage": True}}
        if tools:
            body["tools"] = tools
            names = tuple(t["function"]["name"] for t in tools)
            body["tool_choice"] = tool_choice(self.info.kind, names, settings.constrained, not observed(prompt))[0]
            if not streams(self.info.kind, body["tool_choice"]):
                body["stream"] = False  # the whole reply at once (complete() reads either)
                del body["stream_options"]
        if stop_sequences(prompt.fmt):
            body["stop"] = list(stop_sequences(prompt.fmt))
        return body

    def complete(self, prompt: Prompt, settings: Settings, on_token: OnToken | None = None) -> BackendReply:
        target = check_url(self.url, self.allow)
        body = json.dumps(self.request_body(prompt, settings)).encode()
        ex = open_request(target, "POST", body, _headers(self.api_key), settings.timeout_s)
        try:
            if "text/event-stream" not in (ex.response.getheader("Content-Type") or ""):
                reply = parse_chat_completion(read_capped(ex), self.url)  # a server that ignored "stream"
                if on_token is not None and reply.text:
                    on_token(reply.text)
                return reply
            return read_stream(lines(ex), on_token, self.url, self.context_window)
        finally:
            ex.close()


class _Assembly:
    """A streamed reply put together from its chunks: text, thought, index-keyed tool calls, usage."""

    def __init__(self, on_token: OnToken | None):
        self.on_token, self.text, self.thought = on_token, [], []
        self.calls: dict[int, dict] = {}
        self.usage: Usage | None = None
        self.finish: str | None = None  # None until the server names one: a cut stream never does
        self.pieces = 0  # the deltas that carried text or a call: one token each on every server seen

    def feed(self, chunk: dict) -> None:
        if chunk.get("usage"):
            u = chunk["usage"]
            self.usage = Usage(int(u["prompt_tokens"]), int(u.get("completion_tokens") or 0), "server")
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            self._text(delta.get("content"), self.text, self.on_token)
            self._text(delta.get("reasoning_content"), self.thought, None)
            for c in delta.get("tool_calls") or ():
                self._call(c)
            self.pieces += bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))
            self.finish = str(choice.get("finish_reason") or self.finish or "") or None

    @staticmethod
    def _text(piece, parts: list, on_token: OnToken | None) -> None:
        if piece is None or piece == "":
            return
        if not isinstance(piece, str):
            raise _Malformed(f"a delta's text is {type(piece).__name__}, not a string")
        parts.append(piece)
        if on_token is not None:
            on_token(piece)

    def _call(self, c: dict) -> None:
        slot = self.calls.setdefault(int(c.get("index", len(self.calls))), {"id": "", "name": "", "args": []})
        slot["id"] = str(c.get("id") or slot["id"])
        fn = c.get("function") or {}
        name = str(fn.get("name") or "")
        if name != slot["name"]:  # a server that constrains a call repeats the whole name in every chunk
            slot["name"] += name
        args = fn.get("arguments")
        slot["args"].append(args if isinstance(args, str) else json.dumps(args) if args is not None else "")
        if len(self.calls) > 64:
            raise _Malformed("more than 64 tool calls in one reply")

    def reply(self) -> BackendReply:
        calls = tuple(ToolCall(s["id"], s["name"], "".join(s["args"]) or "{}")
                      for _, s in sorted(self.calls.items()))
        if any(not c.name for c in calls):
            raise _Malformed("a tool call without a name")
        return BackendReply("".join(self.text), calls or None, thought="".join(self.thought),
                            usage=self.usage, finish_reason=self.finish or "stop", from_server=True)


class _Malformed(ValueError):
    """A reply that breaks the wire format; its message is ours, never the server's bytes."""


EMPTY_STREAM = ("the server answered HTTP 200 with an empty stream: the prompt may exceed the server's "
                "context window")


def cut_off(pieces: int) -> str:
    """What a reply that stopped before its end is called (the loop prefixes "backend error: ")."""
    return f"the reply was cut off after {pieces} token{'s' * (pieces != 1)}"


def read_stream(events: Iterator[bytes], on_token: OnToken | None, url: str = "the server",
                window: int | None = None) -> BackendReply:
    """Server-sent events (`data: {chunk}` lines, ended by `data: [DONE]`) → BackendReply.

    A reply is whole once the server named a finish_reason or sent [DONE] (transformers serve
    ends with the finish chunk and no [DONE]); a stream that ends, or whose connection fails,
    before either is a cut reply, never an answer. An empty stream names its likely cause.

    >>> out = []
    >>> r = read_stream(iter([b'data: {"choices":[{"delta":{"content":"Hel"}}]}\\n', b'\\n',
    ...                       b'data: {"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}\\n',
    ...                       b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\\n',
    ...                       b'data: [DONE]\\n']), out.append)
    >>> out, r.text, r.usage.prompt_tokens, r.usage.completion_tokens, r.finish_reason
    (['Hel', 'lo'], 'Hello', 5, 2, 'stop')
    >>> read_stream(iter([b'data: {"choices":[{"delta":{"content":"Once upon"}}]}\\n']), None)
    Traceback (most recent call last):
    ...
    agent.backends.BackendError: the reply was cut off after 1 token
    """
    acc, n, done = _Assembly(on_token), 0, False
    try:
        for raw in events:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data:"):
                continue  # comments (": keep-alive"), event:, id:, blank separators
            payload = line[5:].strip()
            if payload == "[DONE]":
                done = True
                break
            n += 1
            chunk = json.loads(payload)
            if not isinstance(chunk, dict):
                raise _Malformed(f"event {n} is a JSON {type(chunk).__name__}, not an object")
            acc.feed(chunk)
    except ConnectionLost as e:
        if not acc.pieces:
            raise
        raise BackendError(f"{cut_off(acc.pieces)} ({e})") from None
    except _Malformed as e:
        raise BackendError(f"malformed reply from {url}: {e}") from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise BackendError(f"malformed reply from {url}: {e.__class__.__name__} in event {n}") from None
    if n == 0:
        raise BackendError(EMPTY_STREAM + (f" ({window:,} tokens)" if window else ""))
    if not done and acc.finish is None:
        raise BackendError(cut_off(acc.pieces))
    try:
        return acc.reply()
    except _Malformed as e:
        raise BackendError(f"malformed reply from {url}: {e}") from None


def parse_chat_completion(raw: bytes, url: str = "the server") -> BackendReply:
    """An OpenAI chat.completion body (not streamed) → BackendReply; anything malformed raises
    BackendError naming what was wrong, never quoting the body."""
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        message = choice["message"]
        calls = tuple(_wire_call(c) for c in message.get("tool_calls") or ())
        usage = data.get("usage") or {}
        tokens = Usage(int(usage["prompt_tokens"]), int(usage.get("completion_tokens", 0)), "server") \
            if "prompt_tokens" in usage else None
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise _Malformed(f"content is {type(content).__name__}, not a string")
    except _Malformed as e:
        raise BackendError(f"malformed reply from {url}: {e}") from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise BackendError(f"malformed reply from {url}: {e.__class__.__name__}") from None
    return BackendReply(content, calls or None, thought=str(message.get("reasoning_content") or ""),
                        usage=tokens, finish_reason=str(choice.get("finish_reason") or "stop"), from_server=True)


def _wire_call(c: dict) -> ToolCall:
    fn = c["function"]
    args = fn.get("arguments", "{}")
    # Ollama may send arguments as an object; the runtime keeps the JSON string
    return ToolCall(str(c.get("id", "")), str(fn["name"]), args if isinstance(args, str) else json.dumps(args))
