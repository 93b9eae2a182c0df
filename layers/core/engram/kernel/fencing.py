"""Prompt fencing: the one way stored text is written into model input.

Stored text (memory keys, values and topics, user facts, director learnings, agent names, team
titles) is data the user or a model wrote; it must never read as part of the prompt's structure.
Every prompt section renders it with these helpers, so no section can get it wrong on its own:

- `quote`: a JSON string literal, for text inside a `<memory>` fence. Quotes and backslashes are
  escaped, `<` and `>` become \\u003c and \\u003e (it cannot open or close a tag), and every line
  break is escaped, including the ones JSON leaves raw (U+0085, U+2028, U+2029), so it cannot start
  a line that looks like a heading or a role marker. Control and invisible format characters JSON
  leaves raw are escaped too (\\u202e): C1 controls and DEL, bidi embeddings, overrides and isolates
  (U+202A-U+202E, U+2066-U+2069), marks, zero-width characters, BOMs and the tag characters
  (U+E0000-U+E007F, which spell ASCII invisibly), so no stored text reorders or hides what a reader
  or the model sees.
- `token`: an identifier (an id, a run memory key, a timestamp) as is when it only holds
  [A-Za-z0-9_.:-], quoted otherwise.
- `inline`: a name inside a sentence of the prompt (the agent's own name): on one line (every run
  of whitespace and control characters, line breaks included, is one space), invisible format
  characters (bidi controls among them) removed, `<`/`>` escaped.
- `fence`: the labelled block those lines sit in; `unfence` takes fence tags out of instruction
  text (a persona) so the only fence tags in a prompt are the ones `fence` wrote.

Enum-like fields (category, source, confidence) are validated by their models when read and are
rendered as the bare enum value. The output is deterministic, so the cached prompt prefix stays
byte-identical while the stored rows do not change.
"""

from __future__ import annotations

import json
import re

FENCE_TAG = "memory"

# The tag brackets, and what JSON leaves raw but str.splitlines() (and a reader) takes as a line
# break. Chained replaces: several times faster than str.translate for these non-ASCII targets.
_JSON_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("\x85", "\\u0085"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))
# What JSON leaves raw and a reader does not see: DEL and C1 controls, soft hyphen, Arabic letter mark,
# Mongolian vowel separator, zero-width characters and marks, bidi embeddings, overrides and
# isolates, invisible operators, BOM, interlinear annotations, tag characters.
_INVISIBLE = re.compile(
    "[\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)
_TOKEN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
# \s covers \n \r \v \f \x1c-\x1f \x85 \u2028 \u2029 and the other Unicode spaces; the rest are controls.
_BREAKS = re.compile(r"[\s\x00-\x1f\x7f-\x9f]+")
_FENCE_TAGS = re.compile(rf"<(\s*/?\s*{FENCE_TAG})", re.I)


def data_json(value: object) -> str:
    """Any JSON value as one line of JSON that cannot open or close a tag."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    for raw, escaped in _JSON_ESCAPES:
        text = text.replace(raw, escaped)
    return _INVISIBLE.sub(_escaped, text)


def _escaped(char: re.Match[str]) -> str:
    return json.dumps(char.group(0))[1:-1]  # \u202e; a tag character as its surrogate pair


def quote(text: str) -> str:
    return data_json(text)


def token(text: str) -> str:
    return text if _TOKEN.fullmatch(text) else quote(text)


def inline(text: str) -> str:
    return _INVISIBLE.sub("", _BREAKS.sub(" ", text)).strip().replace("<", "&lt;").replace(">", "&gt;")


def unfence(text: str) -> str:
    return _FENCE_TAGS.sub(r"&lt;\1", text)


def fence(scope: str, lines: list[str]) -> str:
    """`lines` must each be built from `quote`d or `token`ed data (and fixed words)."""
    return "\n".join([f'<{FENCE_TAG} scope="{scope}">', *lines, f"</{FENCE_TAG}>"])
