"""Generic high-entropy tokens (random keys, not identifiers or ids), and the base64 and hex runs
whose decoded text is judged on its own."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterator

from engram.secrets.text import classes

_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,1024}")
BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,4096}={0,2}")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s\"'<>]{1,2048}")
# A digest named by its algorithm: an SSH key's fingerprint (SHA256:...), an npm integrity hash
# (sha512-...), an image digest; public, and as random as a key.
_DIGEST = re.compile(r"(?i)(?<![A-Za-z0-9])(?:sha(?:1|224|256|384|512)|md5)[:-][A-Za-z0-9+/=]{16,1024}")
_OWN_ID = re.compile(r"[a-z]{1,12}_[0-9a-hjkmnp-tv-z]{26}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"(?:0x)?[0-9a-fA-F]{1,1024}")
_FRAGMENT = re.compile(r"[A-Za-z0-9+/=_-]{3,64}")
# Words of an identifier: `get`, `User`, `HTTP`, `2`; random keys have short ones (mean < 3 characters).
_SEGMENT = re.compile(r"[A-Z]?[a-z]{1,1024}|[A-Z]{1,1024}(?![a-z])|[0-9]{1,1024}")
_JOINED_MAX = 1024
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}")
_PLAIN = re.compile(r"[A-Z]?[a-z]{1,64}|[A-Z]{1,64}|[0-9]{1,64}")  # a word, an acronym, a number


def entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def random_token(token: str) -> str | None:
    """What a 20+ character token is if it reads like a random key rather than an identifier or an id."""
    core = token.strip("=-_")
    if len(core) < 20 or classes(core) < 3:
        return None
    if _OWN_ID.fullmatch(core) or _UUID.fullmatch(core) or _HEX.fullmatch(core):
        return None
    segments = _SEGMENT.findall(core)
    mean_segment = sum(map(len, segments)) / len(segments)
    bits = entropy(core)
    # AWS secret access keys: 40 of the base64 alphabet. A random one scores >= 4.4 bits (p1); the
    # documentation's own example (...EXAMPLEKEY) has words in it, hence the looser segment bar.
    if _AWS_SECRET.fullmatch(core) and bits >= 4.0 and (mean_segment < 4.0 or "/" in core or "+" in core):
        return "an AWS secret access key"
    if mean_segment >= 3.0:
        return None  # camelCase or snake_case words: AbstractProxyFactoryBean2, Report2024Q3Final
    return "a high-entropy token" if bits >= 0.8 * math.log2(min(len(core), 64)) else None


def decoded(run: str) -> str | None:
    """The text a base64 run stands for, if it decodes to printable UTF-8."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_" if ("-" in body or "_" in body) else None)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    printable = sum(c.isprintable() or c in "\n\t\r" for c in text)
    return text if text and printable == len(text) else None


def candidates(text: str) -> Iterator[str]:
    """Candidates for the generic check: tokens outside URLs, and runs of random-looking words."""
    outside_urls = _DIGEST.sub(" ", _URL.sub(" ", text))
    for run in _TOKEN.finditer(outside_urls):
        yield run.group(0)
    # A run of words most of which look random ("wJalr XUtnF EMI/K 7MDEN ..."): a key split by
    # whitespace; some chunks of a random key are plain ("NUQK"), so two thirds is enough.
    words: list[str] = []
    size = randomish = 0
    for word in [*outside_urls.split(), ""]:
        fragment = _fragment(word)
        if fragment and size + len(word) <= _JOINED_MAX:
            words.append(word)
            size += len(word)
            randomish += not _PLAIN.fullmatch(word)
            continue
        if randomish >= 2 and 3 * randomish >= 2 * len(words):
            yield "".join(words)
        words = [word] if fragment else []
        size, randomish = (len(word), int(not _PLAIN.fullmatch(word))) if fragment else (0, 0)


def _fragment(word: str) -> bool:
    # Ids are 28+ characters: most words skip those two checks.
    return bool(_FRAGMENT.fullmatch(word)) and not (len(word) >= 28 and (_OWN_ID.fullmatch(word) or _UUID.fullmatch(word)))


HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,2048}(?![0-9A-Fa-f])")


def hex_decoded(run: str) -> str | None:
    """The text a hex run stands for, if it is printable ASCII (a git SHA or a checksum is not)."""
    raw = bytes.fromhex(run)
    return raw.decode("ascii") if raw.isascii() and all(32 <= b < 127 for b in raw) else None
