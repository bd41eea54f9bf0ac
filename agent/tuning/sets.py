"""The versioned data: training runs (with and without thoughts), held-in and held-out questions.

    python -m agent.tuning.sets            # regenerates assets/trajectories/*.jsonl (seeded)

What it knows: how many runs of each task kind to make, and the split, fixed before training:
  train      — train phrasings × train entities, the oracle's runs through the real loop;
  held-in    — the same phrasings and entities, other (template, entities) instances where there are any;
  held-out-2 — a second held-out set: other phrasings, the same held-out entities (task_bank.HELD_OUT_2_Q),
               written after the fourth data set and before any training on it;
  held-out-3 — a third held-out set (task_bank.HELD_OUT_3_Q), the same held-out entities, written while
               the eighth data set trained and before any of its results were read;
  held-out-4 — a fourth (task_bank.HELD_OUT_4_Q), written with the ninth data set, before it trained;
  held-out-5 — a fifth (task_bank.HELD_OUT_5_Q), written after the tenth set's adapter trained and
               before any of its results were read;
  held-out-6 — a sixth (task_bank.HELD_OUT_6_Q), written after the tenth set shipped; an eleventh
               data set was trained after it and did not ship (docs/DESIGN-NOTES.md);
  held-out-7 — a seventh (task_bank.HELD_OUT_7_Q), written while a twelfth data set's adapter
               trained and before any of its results were read; the twelfth did not ship;
  held-out   — phrasings, cities, books and unknown cities never trained, in every composition
               (the average of two temperatures and a temperature in Fahrenheit were held out as
               operations until the fourth data set; they are now trained on phrasings of their own).
Each question carries its judge (`expected`): the tools it needs, the strings its answer must
hold, the oracle's calls (for argument exact-match). No (template, entities) pair of held-out
occurs in train (tests/test_tuning.py checks it).

What it does not know: tokens, training, the model.
"""

from __future__ import annotations

import itertools
import random
import re
import sys

from agent.tuning import task_bank as tb
from agent.tuning.trajectories import DATA_DIR, Task, oracle_run, write_jsonl

SEED = 2026
# The first round of training runs, drawn with the split (their counts fix which instances are held in).
TRAIN_COUNTS = {"weather": 44, "unknown_city": 26, "compare": 44, "temp_math": 48, "arithmetic": 44,
                "two_hop": 40, "search": 14, "no_tool": 10, "repair": 22}
# Extra training runs from the *_EXTRA_Q and *_MORE_Q phrasings and the trained one-city
# compositions (task_bank): drawn after the split with their own seeded RNG, so the held-in and
# held-out sets stay exactly what they were; spread evenly over the phrasings (every one occurs).
# The fifth data set (about 1,130 runs): more unknown places to copy (TRAIN_UNKNOWN_MORE), more word
# problems and operation words; one epoch in batches of 4 over a shared prefix, ~17 minutes an adapter.
# The seventh: every run that asks the weather tool in a world of its own (in_a_world), the extra runs
# over task_bank.WORLD_CITIES, and 40 comparisons more for 40 unknown places fewer.
# The tenth: two in three extra two-hop and who-wrote runs ask about an invented book in a library
# world of their own (in_a_library), so a lookup may give two results and the author is read, not known.
EXTRA_TRAIN_COUNTS = {"weather": 90, "unknown_city": 60, "compare": 110, "temp_math": 200, "arithmetic": 130,
                      "two_hop": 150, "search": 40, "no_tool": 36, "repair": 20}
HELD_IN_COUNTS = {"weather": 4, "unknown_city": 3, "compare": 4, "temp_math": 4, "arithmetic": 4,
                  "two_hop": 4, "search": 2, "no_tool": 3}
HELD_OUT_2_COUNTS = {"weather": 5, "unknown_city": 4, "compare": 5, "arithmetic": 5, "two_hop": 5, "search": 2,
                     "no_tool": 3}
SECOND = {"weather": "weather", "unknown_city": "weather", "repair": "weather", "compare": "compare",
          "temp_math": "temp_math", "arithmetic": "arithmetic", "two_hop": "two_hop", "search": "who_wrote",
          "no_tool": "no_tool"}


def _pairs(cities: tuple[str, ...], need: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Ordered pairs of distinct cities (with at least one from `need`, when given)."""
    return [(a, b) for a, b in itertools.permutations(cities, 2) if not need or a in need or b in need]


def _numbers(rng: random.Random) -> dict[str, object]:
    return {"x": rng.randrange(12, 100), "y": rng.randrange(2, 40), "n": rng.randrange(2, 10),
            "d": rng.randrange(60, 481, 5), "t": rng.choice((1.5, 2, 2.5, 3, 4)),
            "p": rng.choice((1.2, 2.5, 3, 4.5, 6)), "pct": rng.choice((5, 10, 15, 20, 25, 50))}


MORE = {"weather": tb.WEATHER_MORE_Q, "compare": tb.COMPARE_MORE_Q,
        "temp_math": tb.TEMP_MATH_MORE_Q + tb.TEMP_MATH_FIFTH_Q,
        "arithmetic": tb.ARITHMETIC_MORE_Q + tb.ARITHMETIC_FIFTH_Q,
        "two_hop": tb.TWO_HOP_MORE_Q + tb.TWO_HOP_EIGHTH_Q, "who_wrote": tb.WHO_WROTE_MORE_Q}

# later held-out sets: (phrasings, first template index)
LATER = {"held_out_2": (tb.HELD_OUT_2_Q, 100), "held_out_3": (tb.HELD_OUT_3_Q, 200),
         "held_out_4": (tb.HELD_OUT_4_Q, 300), "held_out_5": (tb.HELD_OUT_5_Q, 400),
         "held_out_6": (tb.HELD_OUT_6_Q, 500), "held_out_7": (tb.HELD_OUT_7_Q, 600)}
# the question sets, as the benchmark names them; each is the file <name>.jsonl, keyed <name_with_underscores>
SPLITS = ("held-in", "held-out", *(key.replace("_", "-") for key in LATER))
FILES = {"train": "train-with-thoughts.jsonl", "train_without": "train-without-thoughts.jsonl",
         **{split.replace("-", "_"): f"{split}.jsonl" for split in SPLITS}}


def _bank(bank: tuple, extra_bank: tuple, side: int, extra: bool, more: tuple = (),
          later: tuple | None = None) -> list[tuple[int, object]]:
    """(index, phrasing) of a split's templates; the extra ones (the *_EXTRA_Q, then the *_MORE_Q of
    the second round) are numbered after the train ones, the later held-out sets' from 100, 200, 300
    (`later`: (phrasings, first index))."""
    if later is not None:
        phrasings, first = later
        return [(first + i, q) for i, q in enumerate(phrasings)]
    if not extra:
        return list(enumerate(bank[side]))
    return [(len(bank[0]) + i, q) for i, q in enumerate(extra_bank + more)]


def candidates(kind: str, split: str, rng: random.Random, extra: bool = False) -> list[Task]:
    """Every (template, entities) instance of a kind for a split ("train", "held_out" or a LATER key),
    shuffled; with `extra`, the training instances of the kind's extra phrasings instead."""
    side = 0 if split == "train" or extra else 1
    later = (LATER[split][0][SECOND[kind]], LATER[split][1]) if split in LATER else None
    train_cities = tb.WORLD_CITIES if extra else tb.TRAIN_CITIES  # the extra runs ask about more cities
    cities = train_cities if side == 0 else tb.HELD_OUT_CITIES
    books = tb.TRAIN_BOOKS if side == 0 else tb.HELD_OUT_BOOKS
    pairs = _pairs(train_cities) if side == 0 else _pairs(tb.TRAIN_CITIES + tb.HELD_OUT_CITIES, tb.HELD_OUT_CITIES)
    out: list[Task] = []
    if kind in ("weather", "unknown_city", "repair"):
        unknown = tb.HELD_OUT_UNKNOWN if side else tb.TRAIN_UNKNOWN + (tb.TRAIN_UNKNOWN_MORE if extra else ())
        places = unknown if kind == "unknown_city" else cities
        bank = _bank(tb.WEATHER_Q, tb.WEATHER_EXTRA_Q, side, extra, MORE["weather"], later)
        for (i, q), c in itertools.product(bank, places):
            facts = {"bad": tb.BAD_ARGUMENTS[len(out) % len(tb.BAD_ARGUMENTS)]} if kind == "repair" else {}
            out.append(Task(kind, f"weather/{side}.{i}", (c,), q.format(city=c), facts=facts))
    elif kind in ("compare", "temp_math"):
        bank = (tb.COMPARE_Q, tb.COMPARE_EXTRA_Q) if kind == "compare" else (tb.TEMP_MATH_Q, tb.TEMP_MATH_EXTRA_Q)
        for (i, (q, how)), (a, b) in itertools.product(_bank(*bank, side, extra, MORE[kind], later), pairs):
            if how in tb.ONE_CITY_OPS and b != a:
                a, b = (a, b) if a in cities else (b, a)
            key = "lead" if kind == "compare" else "op"
            entities = (a,) if how in tb.ONE_CITY_OPS else (a, b)
            out.append(Task(kind, f"{kind}/{side}.{i}", entities, q.format(a=a, b=b), facts={key: how}))
    elif kind in ("two_hop", "search"):
        bank = (_bank(tb.TWO_HOP_Q, tb.TWO_HOP_EXTRA_Q, side, extra, MORE["two_hop"], later) if kind == "two_hop" else
                [(i, (q, "author"))
                 for i, q in _bank(tb.WHO_WROTE_Q, tb.WHO_WROTE_EXTRA_Q, side, extra, MORE["who_wrote"], later)])
        for (i, (q, ask)), book in itertools.product(bank, books):
            out.append(Task(kind, f"{kind}/{side}.{i}", (book,), q.format(book=book), facts={"ask": ask}))
    elif kind == "arithmetic":
        bank = _bank(tb.ARITHMETIC_Q, tb.ARITHMETIC_EXTRA_Q, side, extra, MORE["arithmetic"], later)
        for (i, (q, expr, answer)), k in itertools.product(bank, range(12)):
            v = _numbers(random.Random(f"{split}-{i}-{k}"))
            entities = tuple(str(v[n]) for n in sorted(v) if f"{{{n}}}" in q)
            facts = {"expression": expr.format(**v), "answer": answer.format(r="{r}", **v)}
            out.append(Task(kind, f"arithmetic/{side}.{i}", entities, q.format(**v), facts=facts))
    elif kind == "no_tool":
        for i, (q, answer, word) in _bank(tb.NO_TOOL_Q, tb.NO_TOOL_EXTRA_Q, side, extra, tb.NO_TOOL_MORE_Q, later):
            out.append(Task(kind, f"no_tool/{side}.{i}", (), q, facts={"answer": answer, "word": word}))
    rng.shuffle(out)
    return [Task(t.kind, t.template, t.entities, t.question, seed=rng.randrange(10**6), facts=t.facts) for t in out]


def _dedupe(tasks: list[Task]) -> list[Task]:
    seen, out = set(), []
    for t in tasks:
        if (t.template, t.entities) not in seen:
            seen.add((t.template, t.entities))
            out.append(t)
    return out


def _spread(tasks: list[Task]) -> list[Task]:
    """The tasks round-robin over their templates (each template's first, then each one's second, …)."""
    rank: dict[str, int] = {}
    keyed = []
    for t in tasks:
        rank[t.template] = rank.get(t.template, -1) + 1
        keyed.append((rank[t.template], t))
    return [t for _, t in sorted(keyed, key=lambda kt: kt[0])]


def split_tasks(seed: int = SEED) -> dict[str, list[Task]]:
    """The fixed split: train, held-in, held-out tasks (the same seed, the same tasks)."""
    rng = random.Random(seed)
    train, held_in, held_out = [], [], []
    for kind, n in TRAIN_COUNTS.items():
        pool = _dedupe(candidates(kind, "train", rng))
        m = HELD_IN_COUNTS.get(kind, 0)
        train += pool[:n] if len(pool) >= n + m else (pool * (n // max(len(pool), 1) + 1))[:n]
        held_in += pool[n:n + m] if len(pool) >= n + m else pool[:m]
    for kind in ("weather", "unknown_city", "compare", "arithmetic", "two_hop", "search", "no_tool"):
        held_out += _dedupe(candidates(kind, "held_out", rng))[:{"search": 2, "no_tool": 3}.get(kind, 5)]
    math = _dedupe(candidates("temp_math", "held_out", rng))
    for op, n in (("difference", 3), ("sum", 2), ("average", 3), ("fahrenheit", 3)):
        held_out += [t for t in math if t.facts["op"] == op][:n]
    extra_rng = random.Random(f"{seed}-extra")  # its own draws: the split above does not move
    library_rng = random.Random(f"{seed}-libraries")  # likewise: the libraries move no other task
    for kind, n in EXTRA_TRAIN_COUNTS.items():
        train += [in_a_library(t, library_rng)
                  for t in _spread(_dedupe(candidates(kind, "train", extra_rng, extra=True)))[:n]]
    world_rng = random.Random(f"{seed}-worlds")  # likewise: the worlds move no task
    return {"train": [in_a_world(t, world_rng) for t in train], "held_in": held_in, "held_out": held_out}


WORLD_KINDS = ("weather", "unknown_city", "compare", "temp_math", "repair")


def in_a_world(task: Task, rng: random.Random) -> Task:
    """A training task that asks the weather tool, with a table of readings of its own (task_bank.world);
    its unknown place stays unknown there. Held-in and held-out questions keep the demo's table."""
    if task.kind not in WORLD_KINDS:
        return task
    known, unknown = ((), task.entities) if task.kind == "unknown_city" else (task.entities, ())
    return Task(task.kind, task.template, task.entities, task.question, task.seed,
                task.facts | {"weather": tb.world(known, unknown, rng)})


LIBRARY_SHARE = 2 / 3  # of the extra two-hop and who-wrote runs, those asked about an invented book


def in_a_library(task: Task, rng: random.Random) -> Task:
    """An extra two-hop or who-wrote training task, with probability LIBRARY_SHARE asked instead
    about an invented book (task_bank.WORLD_BOOKS) in a library world of its own (task_bank.library):
    the same phrasing, the encyclopedia plus the book's and its author's articles drawn for the run."""
    if task.kind not in ("two_hop", "search") or rng.random() >= LIBRARY_SHARE:
        return task
    book = tb.WORLD_BOOKS[rng.randrange(len(tb.WORLD_BOOKS))]
    return Task(task.kind, task.template, (book,), task.question.replace(task.entities[0], book), task.seed,
                task.facts | {"library": tb.library(book, rng)})


def later_held_out(seed: int = SEED, split: str = "held_out_2") -> list[Task]:
    """A later held-out set: HELD_OUT_2_Q's (HELD_OUT_3_Q's, …, HELD_OUT_7_Q's) phrasings over the
    held-out entities, with an RNG of its own."""
    rng, out = random.Random(f"{seed}-{split.replace('_', '-')}"), []
    for kind, n in HELD_OUT_2_COUNTS.items():
        out += _spread(_dedupe(candidates(kind, split, rng)))[:n]
    math = _spread(_dedupe(candidates("temp_math", split, rng)))
    for op in ("difference", "sum", "average", "fahrenheit"):
        out += [t for t in math if t.facts["op"] == op][:2]
    return out


def _first_place(phrase: str) -> str:
    """ "in Santiago de las Vegas, near Havana, Cuba" → "Santiago de las Vegas"."""
    return re.sub(r"^(?:in|near) ", "", phrase).split(",")[0]


def expected(task: Task, record: dict) -> dict:
    """The judge of a question, from the oracle's run: needed tools, required strings, its calls."""
    obs, calls = record["observations"], record["calls"][1:] if task.kind == "repair" else record["calls"]
    if task.kind == "compare":  # the readings answer it; the calculator's max / min is the oracle's way
        obs, calls = zip(*[(o, c) for o, c in zip(obs, calls, strict=True) if c["name"] == "get_weather"], strict=True)
        obs, calls = list(obs), list(calls)
    needs = sorted({c["name"] for c in calls})
    e: dict = {"needs": needs, "calls": calls, "oracle_answer": record["answer"]}
    if task.kind in ("weather", "repair"):
        e["must_contain"] = [obs[-1].split(",")[0]]
    elif task.kind == "unknown_city":
        e.update(honest=True, must_not_contain=["°C"])
    elif task.kind == "compare":
        degrees = {c["arguments"]["city"]: tb._degrees(o) for c, o in zip(calls, obs, strict=True)}
        pick = {"warmer": max, "colder": min}.get(task.facts["lead"])
        lead = pick(degrees, key=degrees.get) if pick else None
        e["must_contain"] = [o.split(",")[0] for o in obs] + ([lead] if lead else [])
        if lead:  # the judge also wants the right city named warmer / colder, not only mentioned
            other = next(c for c in task.entities[:2] if c != lead)
            e["lead"] = {"city": lead, "other": other, "word": task.facts["lead"]}
    elif task.kind in ("temp_math", "arithmetic"):
        e["must_contain"] = [obs[-1]]
    elif task.kind == "two_hop":
        place, year = tb._birth(obs[-1])
        e["must_contain"] = [year if task.facts["ask"] == "year" else _first_place(place)]
    elif task.kind == "search":
        e["must_contain"] = [tb.author_of(obs[0]).split()[-1]]
    elif task.kind == "no_tool":
        e.update(no_tool=True, must_contain=[task.facts["word"]])
    return e


def question_row(task: Task, split: str) -> dict:
    record = oracle_run(task, thoughts=True)
    kind = task.facts.get("op") if task.kind == "temp_math" else task.kind
    return {"id": record["id"], "split": split, "kind": task.kind, "group": kind, "template": task.template,
            "entities": list(task.entities), "question": task.question, "expected": expected(task, record)}


def build(seed: int = SEED) -> dict[str, list[dict]]:
    """Every file's rows: the oracle's runs (both variants) and the judged questions."""
    tasks = split_tasks(seed)
    return {"train": [oracle_run(t, thoughts=True) for t in tasks["train"]],
            "train_without": [oracle_run(t, thoughts=False) for t in tasks["train"]],
            "held_in": [question_row(t, "held-in") for t in tasks["held_in"]],
            "held_out": [question_row(t, "held-out") for t in tasks["held_out"]],
            **{key: [question_row(t, key.replace("_", "-")) for t in later_held_out(seed, key)] for key in LATER}}


def main(argv: list[str] | None = None) -> int:
    out = DATA_DIR if not argv else __import__("pathlib").Path(argv[0])
    for key, rows in build().items():
        path = write_jsonl(out / FILES[key], rows)
        print(f"{path}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
