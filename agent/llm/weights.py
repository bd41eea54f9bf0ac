"""The three weight choices of the Local model, and their LoRA adapters applied offline.

    WEIGHTS = ("base", "trajectory-tuned", "trajectory-tuned without thoughts")
    adapter_folder("trajectory-tuned")       → assets/adapters/trajectory-tuned  (None for "base")
    adapters = load_adapters(lm)             # every shipped adapter, loaded beside the base weights
    adapters.use("trajectory-tuned")         # the weights every forward pass of lm.model uses now
    with adapters.rows(["base", "trajectory-tuned"]):   # one batched pass, row i on weights[i]
        lm.model.model(input_ids=…, attention_mask=…, position_ids=…, cache=…)

What it knows (lecture, "In-Context Learning vs. Post-Training for ReAct"): post-training puts the
ReAct turn format into the weights; here that is a LoRA adapter per choice, trained by
scripts/tune.py (with peft) on the oracle's runs with and without thoughts. The adapters are put
INTO lm.model in place (a forward hook on each adapted Linear adds its low-rank update, per row):
`lm.model` stays the same object, so the code that calls `lm.model.model(...)` and
`lm.model.lm_head(...)` (the batcher's forward in agent/llm/model.py) runs the chosen weights
without a change. Nothing is downloaded: an adapter is a local folder (peft's format) and the base
is the model already loaded.

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
FOLDERS = {"trajectory-tuned": "trajectory-tuned",  # weights → adapter folder
           "trajectory-tuned without thoughts": "trajectory-tuned-without-thoughts"}


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
    """The adapters loaded into one model, and which weights its rows run on now.

    Each adapted Linear keeps its base weight and gets a forward hook that adds the low-rank update
    of each row's adapter: with every adapter's A stacked into one (in, R) matrix and every B, its
    scale folded in, into one (R, out), the update of a pass is ((x @ A) * mask) @ B, where the
    mask gives row i the columns of its adapter (none for a base row). So rows on different
    weights share one pass with two small products a layer and nothing switched between passes,
    and a pass of base rows only adds nothing (mask None). The numbers are peft's
    (tests/test_tuning.py holds the two equal); peft's own mixed-batch path cost 35–60 % more
    per pass, and switching its layers between choices ~25 ms (docs/DESIGN-NOTES.md)."""

    loaded: tuple[str, ...]  # weights names with an adapter in the model
    columns: dict[str, slice]  # weights name → its columns of the stacked rank
    rank: int  # the stacked rank R (the sum of the adapters' r)
    dtype: object  # the model's dtype, for the masks
    mask: object = None  # None: every row on base; else (rows or 1, 1, R), row i's adapter columns 1
    standing: object = None  # use()'s mask, in force outside rows()

    def use(self, weights: str) -> None:
        """Every following forward pass of the model runs with these weights (outside rows())."""
        self.standing = self.mask = self._mask([weights])

    @contextmanager
    def rows(self, weights: Sequence[str]) -> Iterator[None]:
        """Inside: one forward pass over a batch uses weights[i] for row i (one choice for all rows:
        a mask that broadcasts). Every forward pass of the model goes through here, so none depends
        on what ran before; a pass run inside another (decode rows between two layers of a
        prompt's chunk) leaves the outer pass's mask as it found it."""
        outer, self.mask = self.mask, self._mask(weights if len(set(weights)) > 1 else weights[:1])
        try:
            yield
        finally:
            self.mask = outer

    def _mask(self, weights: Sequence[str]):
        """The hooks' mask for rows on these weights (None: all on base); ValueError for one not loaded."""
        import torch

        for w in weights:
            if checked(w) != "base" and w not in self.loaded:
                raise ValueError(f"The adapter for {w!r} is not loaded (missing in {ADAPTERS_DIR}?).")
        if all(w == "base" for w in weights):
            return None
        mask = torch.zeros(len(weights), 1, self.rank, dtype=self.dtype)
        for i, w in enumerate(weights):
            if w != "base":
                mask[i, 0, self.columns[w]] = 1
        return mask


PEFT_PREFIX = "base_model.model."  # how peft names lm.model's modules in an adapter file


def read_adapter(folder: Path) -> tuple[dict[str, tuple], float]:
    """An adapter folder written by peft (scripts/tune.py): {module path in lm.model: (A (r, in),
    B (out, r))} and its scale lora_alpha / r. Only what scripts/tune.py trains is accepted: plain
    LoRA, one r and alpha for every module, no bias."""
    import json

    from safetensors.torch import load_file

    config = json.loads((folder / "adapter_config.json").read_text())
    plain = (config.get("peft_type") == "LORA" and not config.get("rank_pattern") and not config.get("alpha_pattern")
             and not config.get("use_dora") and not config.get("use_rslora") and config.get("bias") == "none")
    if not plain:
        raise ValueError(f"{folder}: not a plain LoRA adapter (one r and alpha, no DoRA, rsLoRA or bias).")
    tensors = load_file(str(folder / "adapter_model.safetensors"))
    pairs = {}
    for key, a in tensors.items():
        if key.startswith(PEFT_PREFIX) and key.endswith(".lora_A.weight"):
            path = key[len(PEFT_PREFIX):-len(".lora_A.weight")]
            pairs[path] = (a, tensors[f"{PEFT_PREFIX}{path}.lora_B.weight"])
    if not pairs or len(pairs) * 2 != len(tensors):
        raise ValueError(f"{folder}: not LoRA A/B pairs only.")
    return pairs, config["lora_alpha"] / config["r"]


def load_adapters(lm, weights: Sequence[str] = WEIGHTS[1:], root: Path = ADAPTERS_DIR) -> Adapters:
    """Load the adapters of `weights` (those present) into lm.model, in place: a forward hook on each
    adapted Linear (Adapters); base stays active."""
    import torch

    present = [w for w in weights if w != "base" and w in available(root)]
    if not present:
        raise FileNotFoundError(f"No adapter in {root}: run `make tune` first.")
    read = [read_adapter(adapter_folder(w, root)) for w in present]
    paths = set(read[0][0])
    if any(set(pairs) != paths for pairs, _ in read):
        raise ValueError(f"The adapters in {root} adapt different layers.")
    dtype = lm.model.dtype
    columns, at = {}, 0
    for w, (pairs, _) in zip(present, read, strict=True):
        r = next(iter(pairs.values()))[0].shape[0]
        columns[w], at = slice(at, at + r), at + r
    adapters = Adapters(tuple(present), columns, at, dtype)
    for path in sorted(paths):
        linear = lm.model.get_submodule(path)
        a = torch.cat([pairs[path][0] for pairs, _ in read]).to(dtype).t().contiguous()  # (in, R)
        b = torch.cat([pairs[path][1] * scale for pairs, scale in read], dim=1).to(dtype).t().contiguous()  # (R, out)
        linear.register_forward_hook(_low_rank_update(adapters, a, b))
    return adapters


def _low_rank_update(adapters: Adapters, a, b):
    """The hook of one adapted Linear: its output plus each row's low-rank update."""

    def hook(_module, args, output):
        mask = adapters.mask
        if mask is None:
            return output
        return output + ((args[0] @ a) * mask) @ b

    return hook
