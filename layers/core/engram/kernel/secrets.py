"""The one secret detector every write path uses (memory, facts, tools, extraction, run inputs, run
memory, learnings, session titles).

Memory is injected into prompts and exported; a secret stored there leaks. `find_secret` says what
kind of secret a text seems to hold, after the text is normalised the way a leak would be read back:

- Unicode NFKC (full-width `ｓｋ－ａｎｔ` is `sk-ant`), then format characters (zero-width spaces and
  joiners, soft hyphens, bidi controls, BOMs) removed;
- known key formats (Anthropic, OpenAI, AWS access key id and secret, GitHub, Slack, Stripe, Google,
  JWT, PEM private keys, credentials in a URL), whose body may be split by up to three whitespace
  characters between any two of its characters ("AKIA IOSF ODNN 7EXA MPLE");
- statements: "password / passcode / passphrase / PIN / secret / API key ... is X", with up to six
  qualifying words between ("the password for the prod db is hunter2") and a value that is not an
  ordinary word ("the password is required") - a password needs no digit, a PIN is 4-12 digits;
- base64 runs that decode to text are judged by that text (a wrapped key is caught, a wrapped
  sentence is not);
- generic tokens: 20+ characters of the base64/URL-safe alphabet with upper case, lower case and a
  digit, and a Shannon entropy (bits per character) of at least 0.8 * log2(min(length, 64)), which
  random keys reach, and words shorter than 3 characters on average, which identifiers
  (`AbstractProxyFactoryBean2`) are not; runs of words two thirds of which look random (not a
  word, an acronym or a number) are joined first: a key split by spaces.

Deliberately not flagged (documented in docs/ARCHITECTURE.md): pure hex (git SHAs, checksums), UUIDs,
our own ids (`run_01k...`), URLs without credentials, dates, prices, hex colours - they are ids or
data far more often than keys; a hex key is still caught after a keyword ("secret: 9f86d0...").

Every repetition in a pattern is bounded (a test checks it) and every loop visits each character a
bounded number of times, so a scan is linear in the text's length. Callers check sizes first.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

# Format characters a key can be split with that render as nothing (or a hyphen at a line break).
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)


def normalise(text: str) -> str:
    """The text as the detector reads it: NFKC, invisible format characters removed."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


# --- known formats ---------------------------------------------------------------------------
def _body(chars: str, n: int) -> str:
    """`n` characters of the class `chars`, any two of them separated by up to 3 whitespace characters."""
    return rf"[{chars}](?:\s{{0,3}}[{chars}]){{{n - 1}}}"


_SPACE = re.compile(r"\s")


def _split_like_a_key(match: re.Match[str]) -> bool:
    """A match split by whitespace is a key cut into chunks, not a sentence after a prefix: every
    chunk but the last has 3+ characters and there is a digit ("sk-learn is a great library" and
    "AKIA IS THE PREFIX OF KEYS" are sentences)."""
    pieces = match.group(0).split()
    return len(pieces) == 1 or (any(c.isdigit() for c in match.group(0)) and all(len(p) >= 3 for p in pieces[:-1]))


_KNOWN: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool] | None]] = [
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----"), None),
    (
        "an AWS access key id",
        re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)\s{0,3}" + _body("0-9A-Z", 16) + r"(?![0-9A-Za-z])"),
        _split_like_a_key,
    ),
    (
        "an AWS secret access key",
        re.compile(r"(?i)aws.{0,20}(?:secret|key).{0,20}[=:\s][\"']?" + _body("A-Za-z0-9/+=", 40) + r"(?![A-Za-z0-9/+=])"),
        None,
    ),
    ("an Anthropic API key", re.compile(r"\bsk-ant-(?:api|admin|oat)?" + _body(r"A-Za-z0-9_\-", 20)), _split_like_a_key),
    ("an API key", re.compile(r"\bsk-(?:proj-|live-|test-|svcacct-)?" + _body(r"A-Za-z0-9_\-", 20)), _split_like_a_key),
    ("a Stripe key", re.compile(r"\b(?:[rs]k_(?:live|test)_|whsec_)" + _body("A-Za-z0-9", 16)), _split_like_a_key),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_" + _body("A-Za-z0-9", 36) + "|github_pat_" + _body("A-Za-z0-9_", 40) + ")"),
        _split_like_a_key,
    ),
    ("a Slack token", re.compile(r"\bxox[abposre]-" + _body("A-Za-z0-9-", 10)), _split_like_a_key),
    ("a Slack webhook", re.compile(r"hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{12}"), None),
    ("a Google API key", re.compile(r"\bAIza" + _body("0-9A-Za-z_-", 35)), _split_like_a_key),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,2000}\.eyJ[A-Za-z0-9_-]{10,4000}\.[A-Za-z0-9_-]{10}"), None),
    ("a credential in a URL", re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^/\s:@]{1,256}:[^/\s:@]{3,256}@"), None),
    (
        "a credential in a URL",
        re.compile(
            r"(?i)[?&](?:access_token|api_?key|apikey|token|secret|password|passwd|sig|signature|x-amz-signature|"
            r"x-amz-credential|x-amz-security-token|client_secret)=[A-Za-z0-9%/+=_.~-]{8}"
        ),
        None,
    ),
]


Finding = tuple[str, str]  # (what kind of secret, the text that is the secret)


def _known(text: str) -> Iterator[Finding]:
    for label, pattern, accept in _KNOWN:
        for match in pattern.finditer(text):
            if accept is None or accept(match):
                yield label, match.group(0)


# --- statements: "the password for the prod db is hunter2" -------------------------------------
# Strong keywords hold any value that is not an ordinary word; PINs hold digits; weak keywords
# ("secret", "token": "the secret is patience") need a value that looks like a credential.
_KEYWORD = re.compile(
    r"(?i)\b(?:(?P<pin>pins?(?:[ -]?(?:code|number))?)|(?P<strong>pass(?:word|wd|code|phrase)s?|pwd|pw)|"
    r"(?P<weak>secrets?(?:[ _-]?key)?|client[ _-]?secret|api[ _-]?keys?|access[ _-]?(?:key|token)s?|"
    r"auth[ _-]?token|bearer[ _-]?token|private[ _-]?key|credentials?|tokens?))\b"
)
_WINDOW = 200
_ASSIGNED = re.compile(r"[\"']?\s{0,3}(?:[:=]|->)\s{0,3}")
_WORD = re.compile(r"\"[^\"\n]{1,100}\"|'[^'\n]{1,100}'|[^\s]{1,100}")
_VERBS = frozenset({"is", "was", "are", "were", "=", ":", "->", "equals", "is:", "was:"})


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A keyword followed by one of these names something else ("password policy is strict").
_COMPOUNDS = _word_set(
    "policy policies manager managers reset resets length lengths requirement requirements rule rules hint hints "
    "field fields strength expiry expiration change changes rotation count counts prompt protection protected "
    "complexity history recovery vault store storage box input screen page form file files hash hashes format "
    "scanner scanning detection detector filter leak leaks"
)
_ORDINARY = _word_set(
    "a an the my your his her their our its this that these those it not no none null nil n/a na empty blank "
    "now still also very too so quite really just only always never in on at to for of with by from into under "
    "stored saved kept written required needed necessary missing wrong incorrect correct right invalid valid "
    "expired expiring changed reset weak strong strict secure insecure long short set unset same different "
    "hidden masked encrypted hashed salted private public secret sensitive mandatory optional managed rotated "
    "shared known unknown forgotten lost compromised leaked safe unsafe good bad fine ok okay great there here "
    "being been going available and or but if when where what which who whom how why something nothing "
    "anything everything used important hard easy simple complex complicated case-sensitive mine yours "
    "ours theirs updated stale old new current temporary default generated random unique personal visible "
    "obvious guessable easy-to-guess one two three four five six seven eight nine ten twelve sixteen "
    "redacted removed deleted gone elsewhere somewhere protected enabled disabled off automatic"
)
_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,100}\(")
_DESCRIPTIVE = re.compile(r"[a-z]{2,40}(?:ed|ing|ly)")
_UNITS = _word_set("characters chars characters. chars. digits letters symbols long bytes bits words")


def _value(word: str) -> tuple[str, bool]:
    """A candidate value without quotes or trailing punctuation, and whether it was quoted."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1].strip(), True
    return word.strip("\"'`").rstrip(".,;:!?)]}>").lstrip("([{<"), False


def _is_credential(kind: str, value: str, quoted: bool, after: str | None) -> bool:
    if not value or value.lower() in _ORDINARY or (after or "").lower().rstrip(".,;") in _UNITS:
        return False
    if not quoted and (_CALL.match(value) or _DESCRIPTIVE.fullmatch(value)):
        return False  # code reading a secret (`token = fetch(limit=100)`), or "the password was refused"
    if kind == "pin":
        return value.isdigit() and 4 <= len(value) <= 12
    if kind == "strong":
        return len(value) >= 4 or (quoted and len(value) >= 3)
    return len(value) >= 6 and any(c.isdigit() or c in "!@#$%^&*+=/~" for c in value)


def _words(window: str, start: int, n: int) -> list[str]:
    return [m.group(0) for m in islice(_WORD.finditer(window, start), n)]


def _follows(kind: str, words: list[str]) -> bool:
    """Whether words[0] is a credential (words[1], if any, tells "16 characters" from "hunter2")."""
    return bool(words) and _is_credential(kind, *_value(words[0]), words[1] if len(words) > 1 else None)


def _statement(text: str) -> Iterator[Finding]:
    for keyword in _KEYWORD.finditer(text):
        kind = keyword.lastgroup or "weak"
        window = text[keyword.end() : keyword.end() + _WINDOW]
        assigned = _ASSIGNED.match(window)
        if assigned:  # password: hunter2, "password": "hunter2", pwd=hunter2
            words = _words(window, assigned.end(), 2)
            if _follows(kind, words):
                yield "a password or secret", _value(words[0])[0]
            continue
        words = _words(window, 0, 8)
        if not words or words[0].lower() in _COMPOUNDS:
            continue
        if kind != "weak" and any(c.isdigit() for c in words[0]) and _follows(kind, words[:2]):
            yield "a password or secret", _value(words[0])[0]  # "PIN 4821", "my passcode 771234"
            continue
        for i, word in enumerate(words[:7]):
            if word.lower() in _VERBS:
                if _follows(kind, words[i + 1 : i + 3]):
                    yield "a password or secret", _value(words[i + 1])[0]
                break
            if word[-1] in ".!?;":
                break  # the sentence ended without saying what the password is


# --- generic high-entropy tokens ---------------------------------------------------------------
_TOKEN = re.compile(r"[A-Za-z0-9+/=_-]{20,1024}")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{12,4096}={0,2}")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^\s\"'<>]{1,2048}")
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


def _classes(text: str) -> int:
    return sum((any(c.isupper() for c in text), any(c.islower() for c in text), any(c.isdigit() for c in text)))


def _random_token(token: str) -> str | None:
    """What a 20+ character token is if it reads like a random key rather than an identifier or an id."""
    core = token.strip("=-_")
    if len(core) < 20 or _classes(core) < 3:
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


def _decoded(run: str) -> str | None:
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


def _tokens(text: str) -> Iterator[str]:
    """Candidates for the generic check: tokens outside URLs, and runs of random-looking words."""
    outside_urls = _URL.sub(" ", text)
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


def _findings(text: str, *, decode: bool) -> Iterator[Finding]:
    """Every secret in a normalised text, the cheapest checks first. A base64 run that decodes to
    text is judged by that text alone (once: no base64 inside base64)."""
    yield from _known(text)
    yield from _statement(text)
    for run in _BASE64_RUN.finditer(text) if decode else ():
        inner = _decoded(run.group(0))
        if inner is not None:
            for label, value in _findings(inner, decode=False):
                yield f"{label} (base64-encoded)", value
    for token in _tokens(text):
        if decode and _BASE64_RUN.fullmatch(token) and _decoded(token) is not None:
            continue  # judged above by what it decodes to: a base64-wrapped sentence is data
        kind = _random_token(token)
        if kind:
            yield kind, token


def find_secret(text: str) -> str | None:
    """What kind of secret `text` seems to hold ("an AWS access key id", "a password or secret", ...),
    or None. Linear in len(text); callers bound the length first."""
    return next((label for label, _ in _findings(normalise(text), decode=True)), None) if text else None


def secret_values(text: str) -> set[str]:
    """The secrets themselves (whitespace removed), for spotting them again in text derived from
    `text`: an extraction candidate that repeats a transcript's passcode without its keyword."""
    return {_SPACE.sub("", value) for _, value in _findings(normalise(text), decode=True) if len(value) >= 4}


def find_secret_in_value(value: Any) -> str | None:
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
    joined = _SPACE.sub("", plain)
    for value in values:
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", plain) or (len(value) >= 12 and value in joined):
            return True
    return False
