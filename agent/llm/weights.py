"""The three weight choices of the Local model, and their LoRA adapters applied offline.

    WEIGHTS = ("base", "trajectory-tuned", "trajectory-tuned without thoughts")
    adapter_folder("trajectory-tuned")       → assets/adapters/trajectory-tuned  (None for "base")
    adapters = load_adapters(lm)             # every shipped adapter, loaded beside the base weights
    adapters.use("trajectory-tuned")         # the weights every forward pass of lm.model uses now
    with adapters.rows(["base", "trajectory-tuned"]):   # one batched pass, row i on weights[i]
        lm.model.model(input_ids=…, attention_mask=…, position_ids=…, cache=…)

What it knows (lecture, "In-Context Learning vs. Post-Training for ReAct"): post-training puts the
ReAct turn format into the weights; here that is a LoRA adapter per choice, trained by
scripts/tune.py on the oracle's runs with and without thoughts. The adapters are injected INTO
lm.model in place (peft replaces its Linear layers by LoRA layers): `lm.model` stays the same
object, so the code that calls `lm.model.model(...)` and `lm.model.lm_head(...)` (the batcher's
forward in agent/llm/model.py) runs the active adapter without a change. Nothing is downloaded: an
adapter is a local folder and the base is the model already loaded.

What it does not know: training, the loop, the KV cache (a cached prefix computed with other
weights is stale: the cache must be keyed by the weights too), or Gradio.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

WEIGHTS: tuple[str, ...] = ("base", "trajectory-tuned", "trajectory-tuned without thoughts")
DEFAULT_WEIGHTS = "trajectory-tuned"
BASE_MODEL = "SmolLM2-135M-Instruct"  # the model the adapters were trained on (LanguageModel.name)
ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "assets" / "adapters"
FOLDERS = {"trajectory-tuned": "trajectory-tuned",  # weights → adapter folder (and peft adapter name)
           "trajectory-tuned without thoughts": "trajectory-tuned-without-thoughts"}
BASE_ROW = "__base__"  # peft's name for "no adapter" in a mixed batch


def checked(weights: str) -> str:
    """The weights name, or ValueError with a sentence that names the choices.

    >>> checked("trajectory-tuned")
    'trajectory-tuned'
    >>> checked("tuned")
    Traceback (most recent call last):
    ValueError: Unknown Local weights 'tuned': choose one of base, trajectory-tuned, trajectory-tuned without thoughts.
    """
    if weights not in WEIGHTS:
        raise ValueError(f"Unknown Local weights {weights!r}: choose one of {', '.join(WEIGHTS)}.")
    return weights


def adapter_folder(weights: str, root: Path = ADAPTERS_DIR) -> Path | None:
    """The adapter folder of a weights choice; None for the base weights.

    >>> adapter_folder("base") is None, adapter_folder("trajectory-tuned without thoughts").name
    (True, 'trajectory-tuned-without-thoughts')
    """
    return None if checked(weights) == "base" else Path(root) / FOLDERS[weights]


def available(root: Path = ADAPTERS_DIR) -> tuple[str, ...]:
    """The choices whose adapter is present (always "base")."""
    return tuple(w for w in WEIGHTS
                 if w == "base" or (adapter_folder(w, root) / "adapter_model.safetensors").is_file())


@dataclass
class Adapters:
    """The adapters loaded into one model, and which weights its layers run now."""

    peft: object  # peft.PeftModel wrapping lm.model (whose layers it changed in place)
    loaded: tuple[str, ...]  # weights names with an adapter in the model
    applied: str | None = None  # what the layers run now (None: after a mixed batch's hooks)

    def use(self, weights: str) -> None:
        """Every following forward pass of the model runs with these weights. Switching walks the
        ~200 LoRA layers (about 25 ms on 2 cores), so it happens only when the choice changes."""
        if checked(weights) != "base" and weights not in self.loaded:
            raise ValueError(f"The adapter for {weights!r} is not loaded (missing in {ADAPTERS_DIR}?).")
        if self.applied == weights:
            return
        lora = self.peft.base_model
        if weights == "base":
            lora.disable_adapter_layers()
        else:
            lora.enable_adapter_layers()
            lora.set_adapter(FOLDERS[weights])
        self.applied = weights

    @contextmanager
    def rows(self, weights: Sequence[str]) -> Iterator[None]:
        """Inside: one forward pass over a batch uses weights[i] for row i. Rows that all share one
        choice switch the model to it, and it stays there after (a class on the default weights
        never switches); mixed rows go through peft's adapter_names hooks. Every forward pass of
        the model goes through here, so none depends on what ran before."""
        if len(set(weights)) == 1:
            self.use(weights[0])
            yield
            return
        names = [BASE_ROW if checked(w) == "base" else FOLDERS[w] for w in weights]
        lora = self.peft.base_model
        lora.enable_adapter_layers()
        self.applied = None
        with lora._enable_peft_forward_hooks(adapter_names=names):
            yield


def load_adapters(lm, weights: Sequence[str] = WEIGHTS[1:], root: Path = ADAPTERS_DIR) -> Adapters:
    """Load the adapters of `weights` (those present) into lm.model, in place; base stays active."""
    from peft import PeftModel

    present = [w for w in weights if w != "base" and w in available(root)]
    if not present:
        raise FileNotFoundError(f"No adapter in {root}: run `make tune` first.")
    peft = PeftModel.from_pretrained(lm.model, str(adapter_folder(present[0], root)),
                                     adapter_name=FOLDERS[present[0]], is_trainable=False)
    for w in present[1:]:
        peft.load_adapter(str(adapter_folder(w, root)), adapter_name=FOLDERS[w], is_trainable=False)
    peft.eval()
    adapters = Adapters(peft, tuple(present))
    adapters.use("base")
    return adapters
