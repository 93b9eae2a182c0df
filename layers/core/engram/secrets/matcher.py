"""The matcher: every kind of rule over a normalised text, the cheapest first, and the functions
the write paths call (through `engram.kernel.secrets`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from engram.secrets.formats import cards, known, pem_bodies
from engram.secrets.languages import stated_anywhere
from engram.secrets.statements import stated
from engram.secrets.text import SPACE, Finding, normalise
from engram.secrets.tokens import BASE64_RUN, HEX_RUN, candidates, decoded, hex_decoded, random_token

# A key spelled with a space between its characters: "s k - a n t - a p i 0 3 - ...".
SPACED_OUT = re.compile(r"(?<!\S)\S(?: \S){11,1023}(?!\S)")


def _findings(text: str, *, decode: bool) -> Iterator[Finding]:
    """Every secret in a normalised text, the cheapest checks first. A base64 or hex run that decodes
    to text is judged by that text alone (once: no encoding inside an encoding)."""
    yield from known(text)
    yield from cards(text)
    yield from pem_bodies(text)
    yield from stated(text)
    yield from stated_anywhere(text)
    for run in SPACED_OUT.finditer(text) if decode else ():
        for label, value in _findings(SPACE.sub("", run.group(0)), decode=False):
            yield f"{label} (spaced out)", value
    for run in BASE64_RUN.finditer(text) if decode else ():
        inner = decoded(run.group(0))
        if inner is not None:
            for label, value in _findings(inner, decode=False):
                yield f"{label} (base64-encoded)", value
    for run in HEX_RUN.finditer(text) if decode else ():
        inner = hex_decoded(run.group(0))
        if inner is not None:
            for label, value in _findings(inner, decode=False):
                yield f"{label} (hex-encoded)", value
    for token in candidates(text):
        if decode and BASE64_RUN.fullmatch(token) and decoded(token) is not None:
            continue  # judged above by what it decodes to: a base64-wrapped sentence is data
        kind = random_token(token)
        if kind:
            yield kind, token


def find_secret(text: str) -> str | None:
    """What kind of secret `text` seems to hold ("an AWS access key id", "a password or secret", ...),
    or None. Linear in len(text); callers bound the length first."""
    return next((label for label, _ in _findings(normalise(text), decode=True)), None) if text else None


def secret_values(text: str) -> set[str]:
    """The secrets themselves (whitespace removed), for spotting them again in text derived from
    `text`: an extraction candidate that repeats a transcript's passcode without its keyword."""
    return {SPACE.sub("", value) for _, value in _findings(normalise(text), decode=True) if len(value) >= 4}


def find_secret_in_value(value: object) -> str | None:
    """`find_secret` over a JSON value: each string or number leaf is read with the name it sits
    under (`{"password": "hunter2"}` reads "password: hunter2"), and every name on its own. Callers
    bound the value's size; each leaf is read once, and no nesting is too deep (no recursion)."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        name, item = pending.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                found = find_secret(str(key))
                if found:
                    return found
                pending.append((str(key), inner))
        elif isinstance(item, list):
            pending.extend((name, inner) for inner in item)
        elif isinstance(item, str | int | float) and not isinstance(item, bool):
            found = find_secret(f"{name}: {item}" if name else str(item))
            if found:
                return found
    return None


def repeats_secret(text: str, values: set[str]) -> bool:
    """Whether `text` repeats one of `values` (from `secret_values`): as a whole word, or for a
    key-sized value anywhere once whitespace is gone (split again)."""
    if not values:
        return False
    plain = normalise(text)
    joined = SPACE.sub("", plain)
    for value in values:
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", plain) or (len(value) >= 12 and value in joined):
            return True
    return False


REDACTED = "[redacted]"
_REDACT_PASSES = 3


def _spelled(value: str) -> re.Pattern[str]:
    """`value` as it may stand in the text: any whitespace between its characters (split keys)."""
    return re.compile(r"\s{0,3}".join(re.escape(c) for c in value))


def redact(text: str) -> str:
    """`text` with every secret it holds replaced by "[redacted]", for text Engram writes itself (a
    summary fold, a card's notes): the rest is kept. A text that needs a change is returned
    normalised (look-alike letters folded); a secret that cannot be located (one inside a base64
    run) takes its line with it. The result passes `find_secret`."""
    if not text or find_secret(text) is None:
        return text
    out = normalise(text)
    for _ in range(_REDACT_PASSES):
        values = sorted({value for _, value in _findings(out, decode=True) if value.strip()}, key=len, reverse=True)
        for value in values:
            out = _spelled(value).sub(REDACTED, out)
        if find_secret(out) is None:
            return out
    return "\n".join(REDACTED if find_secret(line) else line for line in out.splitlines())
