"""ReAct-tab views as HTML (and one matplotlib figure), each a pure function of the recorded States.

    f = frame(states, index, tools, tokenizer, window)    # what the views of one state need
    pseudocode_view(f.state)          history_view(f.state, f.new_history)
    template_view(f, specials)        budget_view(f.breakdown, "SmolLM2 tokenizer", f.usage)
    growth_view(f.state.usage)        stop_view(f.state)

What it knows: how to lay out the lecture's Prompt-ToolLoop with the lines just executed, the
typed history with a bracket from each tool call to the result carrying its tool_call_id, the
exact string of a model call, the token budget and its growth over the calls. Every count comes
from agent/budget.py (Breakdown, growth); here counts are only formatted and turned into bar
widths. Every user, model or tool string goes through ``esc`` (gr.HTML evaluates a JS template
literal), and the same input always gives the same HTML, so stepping back restores a view exactly.

What it does not know: Gradio, backends, or how a state is computed.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from agent import messages as msgs  # the message types, by module: msgs.UserMessage, …
from agent.backends import BackendReply
from agent.budget import (
    BUDGET_CATEGORIES,
    FREE,
    LABELS,
    RESERVED,
    Breakdown,
    Usage,
    breakdown,
    growth,
)
from agent.budget import shares as budget_shares
from agent.loop import (
    LINE_APPEND_RESPONSE,
    PSEUDO_CODE,
    PSEUDO_CODE_TITLE,
    Phase,
    State,
    StopReason,
    budget_of,
    build_prompt,
)
from agent.template import Fmt, Rendered, call_text, render
from agent.tools import Tool
from viz.render import esc

PROMPT_CATEGORIES = tuple(c for c in BUDGET_CATEGORIES if c not in (RESERVED, FREE))
NEW_BADGE = '<span class="rh-new">new</span>'
LINK_COLORS = ("#2563eb", "#d97706", "#059669", "#db2777", "#7c3aed", "#0891b2")
NEXT_LINES = {Phase.START: "line 1 (append the user input)",
              Phase.CALL_MODEL: "lines 2–5 (call the model)",
              Phase.EXECUTE: "lines 6–8 (execute the next tool call)"}
STOP_WHY = {
    StopReason.FINAL_ANSWER: "line 5: a text-only turn IS the answer",
    StopReason.FINISH: "finish[answer] was called: the ReAct paper's explicit exit",
    StopReason.STEP_BUDGET: "line 9: the step cap MAX_STEPS was reached",
    StopReason.CONTEXT_FULL: "before line 3: the prompt plus the reserved reply exceed the budget",
    StopReason.NO_PARSABLE_OUTPUT: "the reply could not be parsed twice in a row",
    StopReason.BACKEND_ERROR: "line 3: the model call failed",
    StopReason.RECORDING_DIVERGED: "line 3: a scripted replay's next reply was recorded after another "
                                   "tool result than yours (Approve / Deny): a recording cannot follow a "
                                   "different choice; choose a model backend to see one read it",
    StopReason.TOKEN_LIMIT: "line 3: the reply ran to the reply-token limit (finish_reason length) — cut, "
                            "so not a final answer; raise Reply tokens or Fork with more",
    StopReason.TOKEN_LIMIT_SERVER: "line 3: the server ended the reply with finish_reason length (its "
                                   "max_tokens, the Reply tokens, was reached) — cut, so not a final answer",
    StopReason.REPETITION: "the repetition check: the same call with the same arguments a third time. "
                           "The harness cannot make a greedy model write something else — its ERROR "
                           "message after the second call changes the context, rarely the reply (a "
                           "small model repeated the call 29 times in 114 runs); what it can do is stop "
                           "the run and say why, as the step cap does",
}
SCRIPTED_NOTE = ("Constrained tool calls: no effect on a scripted replay — its replies were recorded, "
                 "not generated; the checkbox applies to the Local model and to servers")
RESULT_EVENTS = {
    msgs.ResultKind.VALIDATION_ERROR: "validation error: returned to the model as the result",
    msgs.ResultKind.POLICY_REFUSAL: "policy refusal: well-formed, but not permitted",
    msgs.ResultKind.TOOL_ERROR: "tool error: the tool raised; its message is the result",
}


# --- the data of one view ------------------------------------------------------------------------

@dataclass(frozen=True)
class Frame:
    """What the views of states[index] show. `rendered` is the string of model call `call`: the
    one just sent (sent=True; `reply` is what came back) or the one the next call will send."""

    state: State
    call: int
    sent: bool
    rendered: Rendered
    reply: str | None
    breakdown: Breakdown
    new_history: int  # history[new_history:] was added since the previous model call
    new_prompt: int  # the same, for the messages of `rendered`
    usage: Usage | None  # the backend's own count for the call just made
    notes: tuple[str, ...] = ()  # what the backend did to this prompt that the string cannot show


def made_call(state: State) -> bool:
    """True when the phase that produced this state called the model (line 4 ran)."""
    return LINE_APPEND_RESPONSE in state.lines


def new_from(states: tuple[State, ...], index: int) -> int:
    """The history index from which messages were added since the latest model call up to index:
    1 before any call (all but the system prompt), else what that call did not send."""
    for j in range(index, 0, -1):
        if made_call(states[j]):
            return len(states[j - 1].history)
    return 1


def reply_text(reply: BackendReply, fmt: Fmt) -> str:
    """The reply as the model wrote it; calls an API returned structured, as the template writes
    them.

    >>> reply_text(BackendReply("", (msgs.ToolCall("call_1", "get_weather", '{"city": "Berlin"}'),)),
    ...            Fmt.NATIVE)
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Berlin"}}</tool_call>'
    """
    if reply.tool_calls is None:
        return reply.text
    calls = [call_text(c, fmt) for c in reply.tool_calls]
    return "\n".join(([reply.text] if reply.text else []) + calls)


def frame(states: tuple[State, ...], index: int, tools: tuple[Tool, ...], tokenizer,
          window: int | None) -> Frame:
    """Everything the views of states[index] need; the counts come from agent.budget.breakdown."""
    state = states[index]
    sent = index > 0 and made_call(state)
    prompt = build_prompt(states[index - 1] if sent else state, tools)
    counts = breakdown(prompt, tokenizer, budget_of(state.settings.context_budget, window),
                       state.settings.max_new_tokens)
    reply = reply_text(state.replies[-1], prompt.fmt) if sent and state.replies else None
    new_prompt = new_from(states, index - 1 if sent else index)
    return Frame(state, state.step if sent else state.step + 1, sent, render(prompt, tokenizer),
                 reply, counts, new_from(states, index), new_prompt,
                 state.usage[-1] if sent and state.usage else None)


# --- Prompt-ToolLoop -----------------------------------------------------------------------------

def pseudocode_view(state: State, *, running: bool = False, under_lines: str = "") -> str:
    """The nine lines; those the last phase executed are highlighted, the last one strongest.
    `under_lines`: HTML placed right under them (viz/react/context_run.py: where compaction runs)."""
    lines = (2, 3) if running else state.lines
    items = []
    for n, code in enumerate(PSEUDO_CODE, 1):
        cls = "current" if lines and n == lines[-1] else "ran" if n in lines else ""
        body, _, comment = code.partition("//")
        note = f'<span class="rp-comment">// {esc(comment.strip())}</span>' if comment else ""
        items.append(f'<li class="rp-line {cls}" data-line="{n}"><span class="rp-no">{n}:</span>'
                     f'<span class="rp-code"><code>{esc(body.rstrip())}</code>{note}</span></li>')
    step = state.step + running  # while the model writes, line 2 has counted this step
    dots = "".join(f'<span class="rp-dot{" on" if i < step else ""}"></span>'
                   for i in range(state.settings.max_steps))
    if running:
        status = "running: LLM(context) is writing its reply …"
    elif state.done:
        status = f"stopped: {esc(state.stop_reason)}"
    else:
        status = "next: " + NEXT_LINES[state.phase]
    pending = f" · {len(state.pending)} call(s) pending" if state.pending else ""
    return (
        f'<div class="rp" data-lines="{",".join(map(str, lines))}" data-step="{step}" '
        f'data-running="{int(running)}"><div class="rp-title">{esc(PSEUDO_CODE_TITLE)}</div>'
        f'<ol class="rp-lines">{"".join(items)}</ol>{under_lines}'
        f'<div class="rp-step"><span class="rp-count">step {step} of MAX_STEPS = '
        f'{state.settings.max_steps}</span><span class="rp-dots">{dots}</span></div>'
        f'<div class="rp-status">{status}{pending}</div>'
        f'<div class="rp-note">{esc(state.note)}</div></div>'
    )


# --- the history ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Link:
    """A tool call (in message `start`) and its result (message `end`; None while it has none)."""

    call_id: str
    start: int
    end: int | None
    color: str
    lane: int = 0


def links(history: tuple[msgs.Message, ...]) -> list[Link]:
    """One link per tool call, to the first later result with its id, in non-overlapping lanes.

    >>> a = msgs.AssistantMessage(tool_calls=(msgs.ToolCall("call_1", "f", ""), msgs.ToolCall("call_2", "f", "")))
    >>> [(k.call_id, k.start, k.end, k.lane) for k in links((a, msgs.ToolResultMessage("call_2", "")))]
    [('call_1', 0, None, 0), ('call_2', 0, 1, 1)]
    """
    found = []
    for i, m in enumerate(history):
        for c in m.tool_calls if isinstance(m, msgs.AssistantMessage) else ():
            end = next((j for j in range(i + 1, len(history))
                        if isinstance(history[j], msgs.ToolResultMessage)
                        and history[j].tool_call_id == c.id), None)
            found.append(Link(c.id, i, end, LINK_COLORS[len(found) % len(LINK_COLORS)]))
    busy: list[int] = []  # the last message each lane is taken until
    out = []
    for k in found:
        lane = next((j for j, until in enumerate(busy) if until < k.start), len(busy))
        busy[lane:lane + 1] = [len(history) if k.end is None else k.end]
        out.append(Link(k.call_id, k.start, k.end, k.color, lane))
    return out


def _call_chip(call: msgs.ToolCall, color: str, pending: bool) -> str:
    wait = ('<span class="rh-pending">pending: lines 6–8 run it on Next, or on Approve / Deny when it '
            'waits for approval</span>') if pending else ""
    return (f'<div class="rh-call" data-call-id="{esc(call.id)}" style="--c:{color}">'
            f'<span class="rh-id">{esc(call.id)}</span> <b>{esc(call.name)}</b>'
            f'<span class="rh-args">({esc(call.arguments)})</span>{wait}</div>')


def _result_card(m: msgs.ToolResultMessage, color: str | None) -> tuple[str, str, str]:
    event = RESULT_EVENTS.get(m.kind, "")
    orphan = ('<div class="rh-flag">⚠ orphan: no earlier call has this tool_call_id</div>'
              if color is None else "")
    classes = f"rh-tool kind-{esc(m.kind)}" + " rh-event" * bool(event) + " rh-bad" * bool(orphan)
    kind = f'<span class="rh-kind">{esc(event)}</span>' if event else ""
    head = (f'ToolResultMessage <span class="rh-id" style="--c:{color or "#b91c1c"}">tool_call_id '
            f'{esc(m.tool_call_id)}</span>{kind}')
    return classes, head, f'{orphan}<div class="rh-body">{esc(m.content)}</div>'


def _card(m: msgs.Message, colors: dict[str, str], pending: set[str]) -> tuple[str, str, str]:
    """(css classes, head, body) of one message."""
    if isinstance(m, msgs.SystemMessage):
        return "rh-system", "SystemMessage", f'<div class="rh-body small">{esc(m.content)}</div>'
    if isinstance(m, msgs.UserMessage):
        body = f'<div class="rh-body">{esc(m.content)}</div>'
        if m.origin == msgs.Origin.RUNTIME:
            return "rh-user rh-event", "UserMessage · runtime feedback: unparsable reply", body
        if m.origin == msgs.Origin.SUMMARY:
            return "rh-user rh-summary", f"UserMessage · compaction summary of {m.replaced} model turn(s)", body
        return "rh-user", "UserMessage", body
    if isinstance(m, msgs.ToolResultMessage):
        return _result_card(m, colors.get(m.tool_call_id))
    thought = f'<div class="rh-thought">Thought: {esc(m.thought)}</div>' if m.thought else ""
    text = f'<div class="rh-body">{esc(m.text)}</div>' if m.text else ""
    calls = "".join(_call_chip(c, colors[c.id], c.id in pending) for c in m.tool_calls)
    kind = " · tool_calls" if m.tool_calls else " · text only" if m.text else ""
    return "rh-assistant", "AssistantMessage" + kind, thought + text + calls


def history_view(state: State, new_from_index: int) -> str:
    """The typed messages, each call bracketed to its result, the pairing invariant checked."""
    history, found = state.history, links(state.history)
    colors = {k.call_id: k.color for k in found}
    pending = {c.id for c in state.pending}
    n_lanes = max((k.lane + 1 for k in found), default=0)
    cells = []
    for i, m in enumerate(history):
        classes, head, body = _card(m, colors, pending)
        new = 0 < i and new_from_index <= i
        cells.append(f'<div class="rh-msg {classes}{" new" * new}" data-index="{i}" '
                     f'style="grid-row:{i + 1};grid-column:{n_lanes + 1}"><div class="rh-head">'
                     f'<span class="rh-no">{i}</span> {head}'
                     f'{NEW_BADGE * new}</div>{body}</div>')
    for k in found:
        status = "paired" if k.end is not None else "pending" if k.call_id in pending else "missing"
        last = len(history) if k.end is None else k.end + 1
        cells.append(f'<div class="rh-link {status}" data-call-id="{esc(k.call_id)}" '
                     f'data-from="{k.start}" data-to="{"" if k.end is None else k.end}" '
                     f'title="{esc(k.call_id)}: {status}" style="grid-row:{k.start + 1} / '
                     f'{last + 1};grid-column:{k.lane + 1};--c:{k.color}"></div>')
    problems = msgs.pairing_violations(history, allow_pending=state.phase == Phase.EXECUTE)
    banner = ('<div class="rh-violations"><b>⚠ pairing invariant violated</b><ul>'
              + "".join(f"<li>{esc(p)}</li>" for p in problems) + "</ul></div>") if problems else ""
    lanes = f"repeat({n_lanes}, 0.8em) " if n_lanes else ""
    return (f'<div class="rh-wrap" data-messages="{len(history)}">{banner}<div class="rh-scroll">'
            f'<div class="rh" style="grid-template-columns:{lanes}minmax(0, 1fr)">{"".join(cells)}'
            '</div></div><div class="rh-legend"><span class="rh-new">new</span> added since the '
            'previous model call · a bracket joins each tool call to the result with its '
            'tool_call_id</div></div>')


# --- the exact string ----------------------------------------------------------------------------

def _special_ranges(text: str, specials: tuple[str, ...]) -> list[tuple[int, int]]:
    if not specials:
        return []
    pattern = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
    return [m.span() for m in re.finditer(pattern, text)]


def string_html(rendered: Rendered, specials: tuple[str, ...], new_message: int,
                offsets: tuple[tuple[int, int], ...] = ()) -> str:
    """The rendered string cut at span, special-token and (if given) token boundaries: each piece
    tinted by its category, special tokens marked, new messages underlined, token starts ruled.
    The text content of the result is exactly rendered.text."""
    text, spans = rendered.text, rendered.spans
    special = _special_ranges(text, specials)
    token_starts = sorted({a for a, b in offsets if b > a})
    points = sorted({0, len(text)} | {s.start for s in spans} | {a for r in special for a in r}
                    | set(token_starts))
    span_starts, special_starts = [s.start for s in spans], [a for a, _ in special]
    n_messages = max((s.message for s in spans), default=0)  # the generation prompt's index
    out = []
    for a, b in zip(points, points[1:], strict=False):
        span = spans[max(bisect.bisect_right(span_starts, a) - 1, 0)] if spans else None
        classes = [f"c-{span.category}" if span else "c-template"]
        k = bisect.bisect_right(special_starts, a) - 1
        if k >= 0 and a < special[k][1]:
            classes.append("sp")
        if span and new_message <= span.message < n_messages:
            classes.append("nw")
        if token_starts:
            t = bisect.bisect_right(token_starts, a) - 1
            classes.append("to" if t % 2 else "te")
            classes += ["tb"] if t >= 0 and token_starts[t] == a else []
        out.append(f'<span class="{" ".join(classes)}">{esc(text[a:b])}</span>')
    return "".join(out)


def _template_head(f: Frame, streaming: bool) -> str:
    if streaming:
        return f"Call {f.call}: sent; the model is writing its reply …"
    if f.sent:
        return f"Call {f.call}: the exact string sent, then the reply"
    if f.state.done:
        return "At the stop: no further model call"
    return f"Call {f.call} (next): the exact string the model will get"


def template_view(f: Frame, specials: tuple[str, ...] = (), *, show_tokens: bool = False,
                  streaming: str | None = None) -> str:
    """The exact string of one model call and after it the reply (streamed while it is written)."""
    offsets = f.breakdown.offsets if show_tokens else ()
    reply = streaming if streaming is not None else f.reply
    tail = ""
    if reply is not None:
        caret = '<span class="rt-caret">▍</span>' if streaming is not None else ""
        tail = f'<span class="rt-reply" title="the model\'s reply">{esc(reply)}</span>{caret}'
    shown = (f" · {len(offsets):,} tokens ruled" if offsets
             else " · boundaries need a tokenizer" if show_tokens else "")
    return (
        f'<div class="rt" data-call="{f.call}" data-sent="{int(f.sent or streaming is not None)}" '
        f'data-prompt-tokens="{f.breakdown.prompt_tokens}">'
        f'<div class="rt-head">{esc(_template_head(f, streaming is not None))} · '
        f'<b>{f.breakdown.prompt_tokens:,} tokens</b>{shown}</div>'
        + "".join(f'<div class="rt-note" role="note">⚠ {esc(n)}</div>' for n in f.notes) +
        f'<div class="rt-scroll"><pre class="rt-text"><span class="rt-prompt">'
        f'{string_html(f.rendered, specials, f.new_prompt, offsets)}</span>{tail}</pre></div>'
        '<div class="rt-legend"><span class="sp">special token</span> · <span class="nw">new since '
        'the previous call</span> · <span class="rt-reply">the reply</span> · the model is '
        'stateless: every call re-sends the whole context</div></div>'
    )


# --- the budget ----------------------------------------------------------------------------------

def budget_view(b: Breakdown, tokenizer_label: str, usage: Usage | None = None) -> str:
    """One bar for the window: each category of the prompt, then reserved and free; a second bar
    zooms into the prompt. Widths are the counts over the window; nothing is recounted here."""
    scale = max(b.budget, b.prompt_tokens + b.reserved)

    def segments(categories, total: int) -> str:
        return "".join(
            f'<span class="rb-seg cat-{c}" data-category="{c}" data-tokens="{b.counts[c]}" '
            f'style="width:{100 * b.counts[c] / total:.3f}%" '
            f'title="{esc(LABELS[c])}: {b.counts[c]:,}"></span>'
            for c in categories if b.counts[c])

    in_prompt = PROMPT_CATEGORIES
    limit = (f'<span class="rb-limit" style="left:{100 * b.budget / scale:.3f}%"></span>'
             if scale > b.budget else "")
    legend = "".join(
        f'<div class="rb-row" data-category="{c}"><span class="rb-swatch cat-{c}"></span>'
        f'<span class="rb-label">{esc(LABELS[c])}</span><span class="rb-n">{b.counts[c]:,}</span>'
        '</div>'
        for c in BUDGET_CATEGORIES)
    over = (f'<div class="rb-over">⚠ {b.prompt_tokens:,} + {b.reserved:,} reserved &gt; '
            f'{b.budget:,}: the context window is full</div>' if b.over else "")
    reported = ""
    if usage is not None and usage.source in ("server", "model"):
        who = "the server reported" if usage.source == "server" else "the model counted"
        reported = (f'<div class="rb-usage">{who} on this call: prompt_tokens '
                    f'{usage.prompt_tokens:,} · completion_tokens {usage.completion_tokens:,}'
                    '</div>')
    elif usage is not None and usage.source == "estimate":  # never silently: say it is a guess
        reported = (f'<div class="rb-usage estimate">no usage from the server on this call: prompt_tokens '
                    f'≈ {usage.prompt_tokens:,} · completion_tokens ≈ {usage.completion_tokens:,}, '
                    'estimated as ⌈characters / 4⌉</div>')
    return (
        f'<div class="rb" data-budget="{b.budget}" data-prompt-tokens="{b.prompt_tokens}" '
        f'data-exact="{int(b.exact)}"><div class="rb-head">Context budget: <b>{b.prompt_tokens:,}'
        f'</b> prompt + <b>{b.reserved:,}</b> reserved of <b>{b.budget:,}</b> tokens</div>'
        f'<div class="rb-bar" aria-label="the context window">{segments(BUDGET_CATEGORIES, scale)}'
        f'{limit}</div><div class="rb-sub">the prompt, zoomed · counted with <span class="rb-tok">'
        f'{esc(tokenizer_label)} · {"exact" if b.exact else "estimated"}</span></div>'
        f'<div class="rb-bar zoom">{segments(in_prompt, max(b.prompt_tokens, 1))}</div>'
        f'<div class="rb-legend">{legend}</div>{over}{reported}</div>'
    )


# --- growth --------------------------------------------------------------------------------------

def _stacked_bar(x: float, width: float, base: float, height: float, counts: dict[str, int]) -> str:
    """One call's bar split by category (State.composition): the same colours as the budget bar."""
    total, y, parts = sum(counts.values()) or 1, base, []
    for c in PROMPT_CATEGORIES:
        h = height * counts.get(c, 0) / total
        if h > 0:
            y -= h
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{h:.1f}" '
                         f'class="rg-seg cat-{c}" data-category="{c}"><title>{esc(LABELS[c])}: '
                         f'{counts[c]:,} ({100 * counts[c] / total:.0f} %)</title></rect>')
    return "".join(parts)


def growth_view(usage: tuple[Usage, ...], width: int = 520, height: int = 200,
                composition: tuple[dict[str, int], ...] = ()) -> str:
    """Input tokens per model call (bars) and their running total (line), from budget.growth;
    with `composition` (State.composition) each bar is split into the categories' shares."""
    points = growth(usage)
    if not points:
        return '<div class="rg empty">No model call yet: each call will add a bar here.</div>'
    split = len(composition) == len(points)
    top, step, base = points[-1].total or 1, (width - 60) / len(points), height - 20
    bars, line = [], []
    for k, p in enumerate(points):
        x, h = 50 + k * step, (height - 40) * p.input_tokens / top
        inner = (_stacked_bar(x + step * 0.15, step * 0.7, base, h, composition[k]) if split else "")
        bars.append(f'<rect x="{x + step * 0.15:.1f}" y="{base - h:.1f}" width="{step * 0.7:.1f}" '
                    f'height="{h:.1f}" class="rg-bar"><title>call {p.call}: {p.input_tokens:,}'
                    f'</title></rect>{inner}<text x="{x + step / 2:.1f}" y="{height - 4}" class="rg-tick">'
                    f'{p.call}</text>')
        line.append(f"{x + step / 2:.1f},{base - (height - 40) * p.total / top:.1f}")
    return _growth_html(points, bars, line, width, height, base, top, composition if split else ())


def _growth_html(points, bars, line, width, height, base, top, composition) -> str:
    shares = budget_shares(composition)
    rows = "".join(f"<tr><td>{p.call}</td><td>{p.input_tokens:,}</td><td>{p.total:,}</td>"
                   + (f"<td>{_top_shares(shares[k])}</td>" if shares else "") + "</tr>"
                   for k, p in enumerate(points))
    head = "<th>largest shares</th>" if shares else ""
    return (
        f'<div class="rg{" split" if shares else ""}" data-calls="{len(points)}" data-total="{points[-1].total}">'
        f'<svg viewBox="0 0 {width} {height}" class="rg-svg" role="img" '
        f'aria-label="input tokens per model call and their running total">'
        f'<line x1="48" x2="{width - 8}" y1="{base}" y2="{base}" class="rg-axis"/>'
        f'<text x="44" y="24" class="rg-tick end">{top:,}</text>'
        '<text x="44" y="42" class="rg-tick end">tokens</text>'
        f'{"".join(bars)}'
        f'<polyline points="{" ".join(line)}" class="rg-line"/></svg>'
        '<div class="rg-rows"><table class="rg-table">'
        f'<tr><th>call</th><th>input tokens</th><th>running total</th>{head}</tr>'
        f'{rows}</table></div><div class="rg-note"><b class="rg-key k-bar">■</b> input tokens of each '
        'model call (x axis) <b class="rg-key k-line">━</b> running total: every call re-sends '
        'everything, so '
        'the total grows with the square of the number of turns</div></div>'
    )


def _top_shares(share: dict[str, float], n: int = 3) -> str:
    best = sorted(((v, c) for c, v in share.items() if v > 0), reverse=True)[:n]
    return " · ".join(f'<span data-category="{c}">{esc(LABELS[c])} {100 * v:.0f} %</span>' for v, c in best)


def growth_figure(usage: tuple[Usage, ...], title: str = ""):
    """The same chart as a matplotlib Figure for slides (save it with fig.savefig(path))."""
    from matplotlib.figure import Figure

    points = growth(usage)
    fig = Figure(figsize=(8, 4.5), dpi=150)
    ax = fig.subplots()
    calls = [p.call for p in points]
    ax.bar(calls, [p.input_tokens for p in points], color="#2563eb", label="input tokens of a call")
    ax.plot(calls, [p.total for p in points], color="#d97706", marker="o", linewidth=3,
            label="running total (everything re-sent)")
    for p in points:
        ax.annotate(f"{p.total:,}", (p.call, p.total), textcoords="offset points", xytext=(0, 8),
                    ha="center", fontsize=12)
    ax.set_xlabel("model call", fontsize=14)
    ax.set_ylabel("tokens", fontsize=14)
    ax.set_xticks(calls)
    ax.tick_params(labelsize=12)
    ax.legend(fontsize=12, loc="upper left")
    ax.set_title(title or "Input tokens per model call", fontsize=15)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


# --- the stop ------------------------------------------------------------------------------------

def stop_view(state: State) -> str:
    """The stop reason with the rule that applied, and the final answer."""
    if not state.done:
        return '<div class="rs running" data-stop="">No stop yet: the loop is running.</div>'
    reason = StopReason(state.stop_reason)
    return (f'<div class="rs done" data-stop="{esc(reason)}"><div class="rs-reason">Stop reason: '
            f'<b>{esc(reason)}</b> <span class="rs-why">({esc(STOP_WHY[reason])})</span></div>'
            f'<div class="rs-answer">{esc(state.final_answer or "")}</div></div>')
