"""Retrieved documents (RAG): the top passages of the offline encyclopedia for a question, by BM25.

What it knows: one passage per article (title + text) of assets/encyclopedia.json, ranked by
Okapi BM25 from the maintained `rank_bm25` library over tools.normalize's words (case- and
accent-blind). The loop puts the block in the context before the first model call, as its own
budget category; the `search` tool stays, so retrieval chosen by the runtime (RAG) and retrieval
chosen by the model (agentic, a tool call) can be compared on the same question.

A passage must reach a relevance floor (MIN_SCORE): a question that matches only common words
gets no documents rather than arbitrary ones.

What it does not know: the loop, tokens, or whether the passages answer the question.

>>> [p.title for p in retrieve("Who wrote Norwegian Wood?", 2)][0]
'Norwegian Wood'
>>> retrieve("zzz qqq", 2)
()
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from rank_bm25 import BM25Okapi

from agent.tools import load_encyclopedia, normalize

MAX_K = 5
MAX_QUERY_CHARS = 2000
MIN_WORD_CHARS = 2  # the "s" of "what's" (rare, so highly weighted) says nothing about the topic
MIN_SCORE = 4.0  # the relevance floor: below it a passage matched only common words ("is", "the")


@dataclass(frozen=True)
class Passage:
    title: str
    text: str
    score: float


@lru_cache(maxsize=1)
def _index() -> tuple[BM25Okapi, tuple]:
    articles = load_encyclopedia()
    corpus = [normalize(f"{a.title} {' '.join(a.aliases)} {a.text}").split() for a in articles]
    return BM25Okapi(corpus), articles


def retrieve(question: str, k: int = 2) -> tuple[Passage, ...]:
    """The k best passages scoring at least MIN_SCORE, best first (ties: encyclopedia order).

    >>> [p.title for p in retrieve("What's the weather in Berlin?", 3)]  # not The Handmaid's Tale
    ['Berlin', 'Germany']
    >>> retrieve("What is 17 * 23?", 2)
    ()
    """
    words = [w for w in normalize(question[:MAX_QUERY_CHARS]).split() if len(w) >= MIN_WORD_CHARS]
    if not words:
        return ()
    bm25, articles = _index()
    scores = bm25.get_scores(words)
    ranked = sorted(range(len(articles)), key=lambda i: (-scores[i], i))
    return tuple(Passage(articles[i].title, articles[i].text, round(float(scores[i]), 3))
                 for i in ranked[:max(1, min(k, MAX_K))] if scores[i] >= MIN_SCORE)


def documents_block(question: str, k: int = 2) -> str:
    """The retrieved passages as the text placed in the context ('' when nothing matched)."""
    passages = retrieve(question, k)
    if not passages:
        return ""
    lines = [f"[{i}] {p.title}: {p.text}" for i, p in enumerate(passages, 1)]
    return "Retrieved documents (BM25 over the encyclopedia, for the question):\n" + "\n".join(lines)
