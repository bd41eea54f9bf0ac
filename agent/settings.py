"""The run's `Settings`: everything a run of Prompt-ToolLoop can be tuned by, in one frozen value.

What it knows: the fields, their defaults, their bounds (`check` names a bad value), and the
JSON form a recording keeps. The loop, the budget, the backends and the context (few-shot
exemplars, retrieved documents, memory, compaction) read it.

What it does not know: what the fields do; Gradio.

>>> Settings(few_shot=2, compact_at=0.8).check()
>>> Settings(compact_at=1.5).check()
Traceback (most recent call last):
ValueError: compact_at must lie in 0.5 … 0.95, got 1.5
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from agent.parameters import number

MAX_FEW_SHOT = 3
COMPACT_RANGE = (0.5, 0.95)


@dataclass(frozen=True)
class Settings:
    """Everything a run can be tuned by; the loop, the budget and the backends read it."""

    max_steps: int = 8  # the lecture's MAX_STEPS: model calls per run
    max_new_tokens: int = 256  # per reply; also the tokens reserved for the reply in the budget
    context_budget: int | None = None  # None: the backend's context window
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0
    constrained: bool = False  # LocalBackend: mask tokens by the turn's grammar (turn_grammar)
    timeout_s: float = 60.0  # wall-clock limit of one model call
    few_shot: int = 0  # worked exemplars in the prompt, 0–3 (agent.context.exemplars)
    retrieve: bool = False  # BM25 passages for the question before the first call (agent.context.retrieval)
    retrieve_k: int = 2  # how many passages
    memory: bool = False  # advertise the `remember` tool (agent.context.memory)
    compact_at: float | None = None  # compact the history past this share of the budget; None: never

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> Settings:
        known = {f.name for f in fields(Settings)}
        return Settings(**{k: v for k, v in d.items() if k in known})

    def check(self) -> None:
        """Raise ValueError naming the first field out of its bounds (agent.parameters.number: the
        one check; a fraction for a whole number is refused). compact_at None: never compact."""
        number(self.few_shot, "few_shot", 0, MAX_FEW_SHOT, integer=True, strings=False)
        number(self.retrieve_k, "retrieve_k", 1, 5, integer=True, strings=False)
        if self.compact_at is not None:
            number(self.compact_at, "compact_at", *COMPACT_RANGE, strings=False)
