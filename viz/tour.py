"""Guided walkthroughs that follow the lecture's order: each stop sets the controls and shows two
lines of the lecture's own text. Data only; the tabs apply a stop to their controls.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stop:
    title: str
    lecture: str  # two lines of the lecture's text (its section in brackets)
    settings: dict = field(default_factory=dict)  # control name → value; a run or example by its stable name
    action: str = ""  # what to do now, in the page's words


SAMPLING_TOUR = (
    Stop("1 · Softmax",
         "The softmax function converts the scores that the network computes for the tokens of the vocabulary "
         "into a probability distribution. Every entry of the softmax is positive and the entries sum to 1. "
         "[Sampling: From Logits to a Token]",
         {"example": "capital-of-france", "temperature": 1.0, "top_k": 0, "top_p": 1.0,
          "min_p": 0.0, "constraint": "None"},
         "The bars and 'all other tokens' add up to 100 %. Press Sample."),
    Stop("2 · Temperature → 0",
         "Temperature scaling divides the logits by a parameter T > 0 before the softmax. T → 0⁺: all "
         "probability mass is on argmax z_i → greedy / deterministic. [Temperature Scaling]",
         {"temperature": 0.3}, "T = 0.3 already piles the mass on the top tokens; drag Temperature on to 0: "
         "greedy, no softmax and no draw."),
    Stop("3 · Temperature → ∞",
         "T = 1: the model's native distribution. T → ∞: → uniform (maximally random). "
         "[Temperature Scaling]",
         {"temperature": 2.5}, "Watch the entropy and the effective number of tokens grow."),
    Stop("4 · Top-k",
         "Top-k keeps the k most probable tokens, sets the others to zero and renormalises. The number of kept "
         "tokens is fixed, so k does not follow the shape of the distribution. [Truncated Sampling]",
         {"temperature": 1.0, "top_k": 2, "top_p": 1.0},
         "Open 'Your own numbers': 0.4, 0.3 become 0.57, 0.43."),
    Stop("5 · Top-p",
         "Top-p keeps the smallest set of tokens whose cumulative probability is ≥ p — the nucleus — and "
         "renormalises. The size of the nucleus is adaptive. [Truncated Sampling]",
         {"top_k": 0, "top_p": 0.9}, "The dashed line is p; the token that crosses it stays."),
    Stop("6 · Constrained decoding",
         "A prompt changes probabilities; a mask removes tokens. Constrained decoding assigns a malformed "
         "continuation the probability zero, so that it cannot be sampled. [Constrained Decoding]",
         {"example": "tool-call-request", "temperature": 1.0, "top_k": 0,
          "top_p": 1.0, "constraint": "JSON tool call"},
         "Press Greedy until the call is complete; then run Asking vs enforcing."),
)

REACT_TOUR = (
    Stop("1 · CoT vs ReAct",
         "CoT improves the reasoning, but the model writes the entire chain before any step is executed: CoT is "
         "open-loop. ReAct extends chain-of-thought to a closed loop. [Open-Loop vs. Closed-Loop]",
         {"task": "two-hop-search"},
         "Press Next: each Thought is followed by an Action and its Observation."),
    Stop("2 · A tool call",
         "The model replies with response.tool_calls — a list of {id, name, arguments}. The runtime parses the "
         "call, validates it, executes the function and returns the result with the matching tool_call_id. "
         "[Function Calling]",
         {"task": "berlin-weather"},
         "Press Next: lines 1, 3–5, then 6–8 run get_weather(city=\"Berlin\")."),
    Stop("3 · A validation error",
         "A validation failure is returned to the model as a tool result; it is not raised to the user as an "
         "exception. The model observes its mistake and can repair the call. [Error Recovery in the Loop]",
         {"task": "validation-recovery"},
         "Press Next until the ERROR tool result appears, then once more."),
    Stop("4 · The budget",
         "Because the model is stateless, the whole context is assembled and sent again with every call. "
         "Each token therefore adds latency and cost at every turn, not once. [The Context Budget]",
         {"task": "two-cities"},
         "Press Run to end: watch the budget bar and the growth chart."),
    Stop("5 · In-context learning vs post-training",
         "In-context learning shows the format by few-shot examples in the prompt. Every request sends the "
         "examples again as tokens, the context window limits their number, and the answer depends on their "
         "choice, order and format. [In-Context Learning vs. Post-Training for ReAct]",
         {"task": "berlin-weather"},
         "Open *Context*, choose **Few-shot exemplars** 2 and press Reset: the exemplars are their own "
         "category in the budget bar, re-sent with every call. Measured (docs/BENCHMARKS.md, the bundled "
         "135M model, T = 0, one run per cell): without constrained decoding it solved 0 of 5 tasks with "
         "0 exemplars and 0 of 5 with 3 — it answered from memory; with constrained tool calls it solved "
         "the Berlin trace with 0–3 exemplars and none of the 5 new tasks (with 0 or 3). Here the harness, "
         "not the examples, carried the format; a post-trained model has it in its weights."),
    Stop("6 · Compaction",
         "The history only grows. When it becomes too large it is compacted: earlier turns are replaced by a "
         "summary — provided that a tool_call and its tool_result stay together. [The Core Definition of ReAct]",
         {"task": "compaction-long-run"},
         "Budget 800 tokens, Compact at 60 %. Press Run to end: before line 3 the older turns become one "
         "summary message (the history shows what it replaced), the budget view shows the prompt before → "
         "after, the growth chart drops, and the run reaches its answer instead of “context window full”."),
)

# The Speculative tab's stops. "draft" names a draft by its stable name (viz.speculative.tab.DRAFTS).
SPECULATIVE_TOUR = (
    Stop("1 · Draft, then verify",
         "A small model drafts several tokens, and the large model verifies them in one pass. The sampling "
         "rules — temperature, top-k, top-p — change the distribution; speculative decoding changes only the "
         "speed. [Speculative Decoding]",
         {"draft": "early-exit", "layers": 24, "gamma": 4, "temperature": 0.0, "top_k": 0, "top_p": 1.0},
         "Press Draft and verify: γ = 4 drafted tokens, one verify pass of the target; each round's row shows "
         "which drafted tokens it accepted and the token the target added."),
    Stop("2 · The distribution is unchanged",
         "A modified rejection-sampling rule guarantees that the emitted tokens have exactly the distribution "
         "of the large model (Leviathan et al., 2023; Chen et al., 2023). [Speculative Decoding]",
         {"temperature": 1.0, "top_p": 0.9},
         "T = 1, top-p 0.9: a drafted token x is kept with probability min(1, p(x) / q(x)); a rejected one is "
         "replaced by a draw from norm(max(0, p − q)). Press Draft and verify a few times."),
    Stop("3 · When drafting pays",
         "Leviathan et al. (2023) measure the wall-clock time of generation against T5-XXL alone: it is 2.3 to "
         "3.4 times shorter. In both the output distribution is unchanged. [Speculative Decoding]",
         {"draft": "prompt-lookup", "temperature": 0.0, "top_p": 1.0},
         "Prompt lookup drafts by copying the n-gram that followed the last words earlier in the prompt: "
         "almost free, and right on repetitive text. Press Run and read the measured speedup."),
    Stop("4 · A poor draft",
         "Speculative decoding accelerates generation without changing the distribution that is sampled from. "
         "[Speculative Decoding]",
         {"draft": "early-exit", "layers": 8},
         "The first 8 of the model's layers guess badly: most drafts are rejected, and each round still pays "
         "for its drafts. Press Run and compare α and the measured speedup with stop 3's: drafting pays only "
         "when the draft is cheap and usually right."),
)


def stop_markdown(tour: tuple[Stop, ...], i: int) -> str:
    """The panel text for stop i of a tour."""
    s = tour[i]
    return f"**{s.title}** ({i + 1} of {len(tour)})\n\n> {s.lecture}\n\n{s.action}"
