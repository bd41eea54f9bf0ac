"""What an OpenAI-compatible server is, from what it says about itself and how it answers.

What it knows:
  ServerInfo          a server's kind ("llama.cpp", "vLLM", "unknown") and context window, with
                      where the window came from (llama.cpp's GET /props n_ctx, vLLM's GET
                      /v1/models max_model_len, or the operator's --remote-context); llama-cpp-python's
                      server is "llama-cpp-python" (is_llama_cpp_python: its OpenAPI title), with the
                      operator's window, since it states none.
  tool_choice         the request's tool_choice for "Constrained tool calls", and what the page says.
  streams             whether a request may stream (llama-cpp-python's function-calling format
                      answers a streamed "auto" request with no event).
  serves_bundled      whether the served model is the lab's bundled one (its tokenizer then counts).

What it does not know: how to reach a server (agent.llm.remote asks, under its guard), the loop,
or the page.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_MODELS = 200


@dataclass(frozen=True)
class ServerInfo:
    """What the lab learnt about a server: its kind ("llama.cpp", "llama-cpp-python", "vLLM" or
    "unknown": the constraint it understands) and its context window, with where that number came from."""

    kind: str = "unknown"
    context_window: int | None = None
    window_from: str = ""  # "/props n_ctx", "/v1/models max_model_len", "operator setting", ""


def window_from_props(props: object) -> int | None:
    """llama.cpp's GET /props → its n_ctx (top level or under default_generation_settings).

    >>> window_from_props({"default_generation_settings": {"n_ctx": 4096}}), window_from_props([])
    (4096, None)
    """
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    n = props.get("n_ctx") or (settings.get("n_ctx") if isinstance(settings, dict) else None)
    return int(n) if isinstance(n, int) and n > 0 else None


def window_from_models(listing: object, model: str) -> int | None:
    """vLLM's GET /v1/models → the max_model_len of `model` (or of the only model listed).

    >>> window_from_models({"data": [{"id": "q", "max_model_len": 32768}]}, "q")
    32768
    """
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    entries = [m for m in data[:MAX_MODELS] if isinstance(m, dict)]
    entry = next((m for m in entries if m.get("id") == model), entries[0] if len(entries) == 1 else None)
    n = entry.get("max_model_len") if entry else None
    return int(n) if isinstance(n, int) and n > 0 else None


LLAMA_CPP_PYTHON_TITLE = "llama.cpp Python API"  # llama-cpp-python's server names itself so in its OpenAPI


def is_llama_cpp_python(openapi: object) -> bool:
    """llama-cpp-python's server (no /props, no window in /v1/models) by its OpenAPI title; it
    constrains a call to a named function as llama.cpp's own server does, and cannot stream a reply
    that may choose a tool (see `streams`).

    >>> is_llama_cpp_python({"info": {"title": "🦙 llama.cpp Python API"}}), is_llama_cpp_python({"info": 3})
    (True, False)
    """
    info = openapi.get("info") if isinstance(openapi, dict) else None
    title = info.get("title") if isinstance(info, dict) else None
    return isinstance(title, str) and LLAMA_CPP_PYTHON_TITLE in title


def serves_bundled(model_id: str, bundled_name: str) -> bool:
    """Whether a server's model id names the lab's bundled model (its tokenizer then counts).

    >>> serves_bundled("HuggingFaceTB/SmolLM2-135M-Instruct", "SmolLM2-135M-Instruct")
    True
    >>> serves_bundled("/tmp/x/smollm2-135m-instruct.Q4_1.gguf", "SmolLM2-135M-Instruct")
    True
    >>> serves_bundled("qwen2.5:7b", "SmolLM2-135M-Instruct")
    False
    """
    def norm(name: str) -> str:
        return "".join(ch for ch in str(name).lower() if ch.isalnum())
    return bool(norm(bundled_name)) and norm(bundled_name) in norm(model_id)


LLAMA_KINDS = ("llama.cpp", "llama-cpp-python")  # both constrain a call to one named function


def streams(kind: str, choice: object) -> bool:
    """Whether the request may ask for a stream. llama-cpp-python's chatml-function-calling format
    raises "Automatic streaming tool choice is not supported" when a streamed request lets the model
    choose a tool (the client sees HTTP 200 and no event), so such a request asks for the whole reply.

    >>> streams("llama-cpp-python", "auto"), streams("llama-cpp-python", {"type": "function"}), streams("vLLM", "auto")
    (False, True, True)
    """
    return not (kind == "llama-cpp-python" and choice == "auto")


def tool_choice(kind: str, tools: tuple[str, ...], constrained: bool, required: bool) -> tuple[object, str]:
    """(the request's `tool_choice`, what the page says "Constrained tool calls" did) for a call that
    offers `tools`. Without the checkbox: "auto" (llama.cpp's function-calling format renders the
    tools only when a tool_choice is sent). With it, the server-side constraint where the server has
    one for this call — `required`: a call must come (the task's first call, as the local grammar).

    >>> tool_choice("llama.cpp", ("get_weather",), True, True)[0]
    {'type': 'function', 'function': {'name': 'get_weather'}}
    >>> tool_choice("vLLM", ("get_weather", "search"), True, True)[0], tool_choice("unknown", ("x",), True, True)[0]
    ('required', 'auto')
    """
    if not constrained:
        return "auto", ""
    if kind == "vLLM":
        return ("required" if required else "auto"), (
            'server-side: tool_choice "required" (vLLM\'s guided decoding: a call must come)' if required else
            'server-side: tool_choice "auto" after a tool result (the answer may come), as the local grammar')
    if kind in LLAMA_KINDS and required and len(tools) == 1:
        return ({"type": "function", "function": {"name": tools[0]}},
                f"server-side: tool_choice names {tools[0]} (llama.cpp's grammar for that one function)")
    if kind in LLAMA_KINDS:
        why = (f"llama.cpp constrains a call only to one named function, and {len(tools)} tools are offered"
               if required else "after a tool result nothing is forced, as the local grammar")
        return "auto", f"no effect on this call: {why}"
    return "auto", ("no effect on this backend: the lab knows no server-side constraint for it "
                    "(it knows llama.cpp's server and vLLM, recognised at the first call)")
