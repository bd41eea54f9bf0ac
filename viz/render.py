"""Pure render functions: data → HTML strings. No Gradio, no arithmetic on probabilities.

Every string that came from a user, a model or a tool goes through ``esc`` before it reaches the
page. ``gr.HTML`` evaluates its template as a JavaScript template literal, so besides HTML's
``& < > " '`` the characters ``$``, ``{`` ``}`` and the backtick are written as entities too:
token text such as ``${alert(1)}`` shows as itself and never runs.
"""

from __future__ import annotations

import html

_JS_TEMPLATE_CHARS = {"$": "&#36;", "`": "&#96;", "{": "&#123;", "}": "&#125;", "\\": "&#92;"}


def esc(text: object) -> str:
    """Escape for HTML and for a JS template literal.

    >>> esc("<b>${x}</b>")
    '&lt;b&gt;&#36;&#123;x&#125;&lt;/b&gt;'
    """
    out = html.escape(str(text), quote=True)
    return "".join(_JS_TEMPLATE_CHARS.get(c, c) for c in out)


def model_header(info: dict[str, str]) -> str:
    """The page header: title and what is loaded (model, source, parameters, vocabulary, …)."""
    facts = "".join(
        f'<span class="fact"><span class="fact-key">{esc(k)}</span> '
        f'<span class="fact-value">{esc(v)}</span></span>'
        for k, v in info.items()
    )
    return (
        '<div class="rl-header"><div class="rl-title">ReAct Lab'
        '<span class="rl-subtitle">how a language model picks its next token, '
        "and how an agent loop runs tools</span></div>"
        f'<div class="rl-facts" aria-label="loaded model">{facts}</div>'
        '<div class="rl-toolbar">'
        '<button type="button" id="rl-mode-toggle" title="large type for a projector, or compact for a desk">'
        "Desk mode</button>"
        '<button type="button" id="rl-dark-toggle" title="light or dark colours">Dark</button>'
        '<button type="button" id="rl-help-toggle" title="keyboard shortcuts (?)">Shortcuts ?</button>'
        "</div></div>"
    )


def token_html(display: str) -> str:
    """A token's display string as HTML: escaped, with ␠ drawn by CSS (few fonts carry U+2420).

    The character stays in the text (copy, search and tests see "␠Paris"); only its look is CSS.
    """
    return esc(display).replace("␠", '<span class="vs">␠</span>')


def message(text: str, kind: str = "info", role: str = "status") -> str:
    """The one line every tab and the page header show for an error or a notice (never a crash,
    never a lost state); "" shows nothing. `kind`: "info" or "error" (viz/theme.py styles .msg).

    >>> message("Stopped.")
    '<div class="msg info" role="status">ℹ Stopped.</div>'
    """
    if not text:
        return ""
    icon = {"error": "⚠", "info": "ℹ"}.get(kind, "")
    return f'<div class="msg {esc(kind)}" role="{esc(role)}">{icon} {esc(text)}</div>'
