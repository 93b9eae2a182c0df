"""The text as the detector reads it, and what every kind of rule shares."""

from __future__ import annotations

import functools
import re
import unicodedata

Finding = tuple[str, str]  # (what kind of secret, the text that is the secret)

SPACE = re.compile(r"\s")


def classes(text: str) -> int:
    """How many of upper case, lower case and digits `text` has."""
    return sum((any(c.isupper() for c in text), any(c.islower() for c in text), any(c.isdigit() for c in text)))


# Format characters a key can be split with that render as nothing (or a hyphen at a line break).
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)


@functools.cache
def _skeleton() -> dict[int, str]:
    """Each non-ASCII letter or digit that UTS #39 lists as confusable with one ASCII letter or digit,
    mapped to it. The table's prototype for a capital I-like letter (Cyrillic І) is "l"; a capital
    folds to "I" so "АКІА" reads "AKIA"."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[int, str] = {}
    for char, homoglyphs in confusables_data.items():
        if len(char) != 1 or char.isascii() or not char.isalnum():
            continue
        ascii_ = [h["c"] for h in homoglyphs if len(h["c"]) == 1 and h["c"].isascii() and h["c"].isalnum()]
        if ascii_:
            table[ord(char)] = "I" if ascii_[0] == "l" and char.isupper() else ascii_[0]
    return table


def normalise(text: str) -> str:
    """The text as the detector reads it: NFKC, invisible format characters removed, look-alike
    letters folded to their ASCII skeleton."""
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return text if text.isascii() else text.translate(_skeleton())
