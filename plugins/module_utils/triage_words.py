"""The class a log's words resemble most, for logs no cause rule names.

A naive Bayes model over which words occur in a log (Bernoulli: presence, not counts),
trained on the public corpus's logs and their classes. The triage asks it only when its
rules found no failure line or only the catch-all class; the answer is reported as a
likely class beside the rules' own, never in their place.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable

# Lower-case words of three or more letters (identifiers keep their underscores): numbers,
# addresses, paths' punctuation and hex ids say nothing about a class.
WORD = re.compile(r"[a-z][a-z_]{2,}")
# A word seen in one training log only is that log's, not its class's.
MIN_LOGS_PER_WORD = 2
SMOOTHING = 0.5


def words_of(texts: Iterable[str]) -> set[str]:
    words: set[str] = set()
    for text in texts:
        words.update(WORD.findall(text.lower()))
    return words


@dataclass
class WordModel:
    logs_per_class: dict[str, int]
    # class -> word -> number of that class's training logs that hold the word
    logs_with_word: dict[str, dict[str, int]]

    @property
    def vocabulary(self) -> set[str]:
        return {word for counts in self.logs_with_word.values() for word in counts}

    def likeliest(self, words: set[str]) -> str:
        return top_class(self.log_scores(words))

    def log_scores(self, words: set[str]) -> dict[str, float]:
        """Log of P(class) * P(each known word present | class), up to a shared constant."""
        known = words & self.vocabulary
        total = sum(self.logs_per_class.values())
        scores = {}
        for cause_class, logs in self.logs_per_class.items():
            counts = self.logs_with_word.get(cause_class, {})
            # fsum: exact whatever the order, so a set's iteration order (PYTHONHASHSEED) cannot move a tie
            scores[cause_class] = math.fsum([math.log(logs / total), *(
                math.log((counts.get(word, 0) + SMOOTHING) / (logs + 2 * SMOOTHING)) for word in known)])
        return scores


def top_class(scores: dict[str, float]) -> str:
    """The best-scored class; of equal scores, the first by name."""
    return max(sorted(scores), key=scores.__getitem__)


def train(logs: Iterable[tuple[set[str], str]]) -> WordModel:
    """A model from (words of a log, its class) pairs."""
    logs = list(logs)
    spread = Counter(word for words, _class in logs for word in words)
    logs_per_class: Counter[str] = Counter()
    logs_with_word: dict[str, Counter[str]] = {}
    for words, cause_class in logs:
        logs_per_class[cause_class] += 1
        logs_with_word.setdefault(cause_class, Counter()).update(
            word for word in words if spread[word] >= MIN_LOGS_PER_WORD)
    return WordModel(
        logs_per_class=dict(sorted(logs_per_class.items())),
        logs_with_word={name: dict(sorted(counts.items())) for name, counts in sorted(logs_with_word.items())},
    )


def model_to_data(model: WordModel) -> dict[str, Any]:
    """As kept in rules.json: per class its log count and one line of `word:count` pairs."""
    return {
        name: {"logs": logs, "words": " ".join(f"{word}:{count}" for word, count in model.logs_with_word[name].items())}
        for name, logs in model.logs_per_class.items()
    }


def model_from_data(data: dict[str, Any]) -> WordModel:
    logs_per_class = {}
    logs_with_word = {}
    for name, entry in data.items():
        logs_per_class[name] = int(entry["logs"])
        pairs = (item.rsplit(":", 1) for item in entry["words"].split())
        logs_with_word[name] = {word: int(count) for word, count in pairs}
    return WordModel(logs_per_class=logs_per_class, logs_with_word=logs_with_word)
