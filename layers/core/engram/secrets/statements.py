"""Statements, in English, German, French, Spanish, Italian, Portuguese and Dutch, in either
order: "the password for the prod db is hunter2", "hunter2 is my password", `SMTP_PASSWORD=...`,
"my bank PIN, 4417,", "482913 unlocks my phone"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import islice

from engram.secrets.text import Finding, classes

# Kinds of keyword: `strong` (a password) holds any value that is not an ordinary word; `login`
# (a login, credentials) a password-shaped value; `pin` a 4-12 digit number (or a lock's
# combination, 12-44-31); `weak` ("secret", "token": "the secret is patience") a value that looks
# like a credential; `phrase` a wallet's recovery phrase (12+ lowercase words).
_KEYWORD = re.compile(
    r"(?i)(?<![\w/@.])(?:"
    r"(?P<pin>(?:(?:code[ -])?pins?(?:[ -]?(?:codes?|numbers?|nummer|nr))?|pincode|geheimzahl|pass ?codes?|"
    r"(?:door|gate|garage|alarm|unlock|access|entry|lock|safe|keypad|building|security|t[uü]r|zugangs|haust[uü]r)[ -]?codes?|"
    r"codes? d'acc[eè]s|codes? secrets?|c[oó]digo(?: pin| secreto)?|"
    r"(?:safe|lock|locker|padlock|tresor)[ -]?(?:combination|kombination)|"
    r"codes? (?:for|of|to) (?:the |my |our )?(?:front |back |side )?(?:door|gate|garage|alarm|safe|lock|house|flat)))|"
    r"(?P<strong>pass(?:words?|w[oö]rt(?:er)?|wd|phrases?)|pwd|pw|kennw[oö]rter|kennwort|mots? de passe|mdp|"
    r"contrase[nñ]as?|senhas?|wachtwoord(?:en)?|parola d'ordine|(?:admin|root|user|wifi|wlan|account)[ _-]?pass|claves?)|"
    r"(?P<cvv>cvv2?|cvc2?|csc|card security code|card verification (?:code|value))|"
    r"(?P<login>logins?|log-ins?|credentials?|creds|zugangsdaten|identifiants)|"
    r"(?P<phrase>(?:recovery|seed|mnemonic|backup|wallet)[ -](?:phrase|words))|"
    r"(?P<weak>secrets?(?:[ _-]?key)?|client[ _-]?secret|api[ _-]?keys?|apikey|access[ _-]?(?:key|token)s?|"
    r"auth[ _-]?token|bearer(?:[ _-]?token)?|private[ _-]?key|tokens?|(?:wifi|wi-fi|wlan|license|licence|product|"
    r"encryption|signing|master)[ _-]?keys?|(?:wlan|wifi)-?schl[uü]ssel)"
    r")(?![\w/@])"
)
_WINDOW = 200
_ASSIGNED = re.compile(r"[\"']?\s{0,3}(?:[:=]|->)\s{0,3}")
_WORD = re.compile(r"\"[^\"\n]{1,100}\"|'[^'\n]{1,100}'|[^\s]{1,100}")
# "is" and its kin in the languages a user types; English ones may hold a plain-word password.
_ENGLISH_VERBS = frozenset({"is", "was", "are", "were", "be", "equals", "=", ":", "->", "is:", "was:", "it's", "its"})
_VERBS = _ENGLISH_VERBS | frozenset(
    {"ist", "lautet", "war", "sind", "heißt", "est", "c'est", "était", "es", "era", "son", "è", "é", "sono", "zijn"}
)
_FILLERS = frozenset({"just", "simply", "still", "now", "actually", "currently", "to", "happens", "would", "will", "should"})
_ENDS = frozenset(".!?;")


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# A keyword followed by one of these names something else ("password policy is strict").
_COMPOUNDS = _word_set(
    "policy policies manager managers reset resets length lengths requirement requirements rule rules hint hints "
    "field fields strength expiry expiration change changes rotation count counts prompt protection protected "
    "complexity history recovery vault store storage box input screen screens page form file files hash hashes format "
    "scanner scanning detection detector filter leak leaks pad pads budget economy economics limit limits "
    "usage price prices santa ingredient feature features"
)
ORDINARY = _word_set(
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
    "redacted removed deleted gone elsewhere somewhere protected enabled disabled off automatic found sent "
    "given shown told chosen written spoken broken made done seen held kept taken asked needed "
    "courage patience time key name title"
)
_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,100}[(\[]")
_DESCRIPTIVE = re.compile(r"[a-z]{2,40}(?:ed|ing|ly)")
_UNITS = _word_set(
    "characters chars characters. chars. digits letters symbols long bytes bits words zeichen stellen stellig "
    "caractères chiffres caracteres dígitos caratteri cifre tekens cijfers days tage jours días"
)
_REFERENCE = re.compile(r"[$%<{]|\.\.\.$|\*{3}")  # $VAR, ${VAR}, %VAR%, <placeholder>, {{var}}, ..., ***


def _value(word: str) -> tuple[str, bool]:
    """A candidate value without quotes or trailing punctuation, and whether it was quoted."""
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        return word[1:-1].strip(), True
    for _ in range(2):  # "(`name`)", "...`)": brackets, then quotes, then what they held in
        word = word.rstrip(".,;:!?)]}>#").lstrip("([{<").strip("\"'`")
    return word, False


_TICKET = re.compile(r"[A-Z][A-Z0-9]{1,9}-\d{1,7}")
_MEASURE = re.compile(r"\d[\d,.]{0,20}-[A-Za-z]{1,20}")  # 32,000-character, 6-digit, 2-factor
_VERSION = re.compile(r"v?\d{1,6}(?:\.\d{1,6}){1,4}[a-z]{0,8}\d{0,4}")
_FILE = re.compile(r".{1,64}\.(?:[a-z]{2,5})", re.I)


_ADDRESS = re.compile(r"^@|@[\w-]{1,64}\.[A-Za-z]|://")  # @handle, user@host.tld, scheme://


def password_shaped(value: str) -> bool:
    """Letters with digits or symbols, 6-64 characters, and not an address, a path, a file name, an id
    or a version ("hunter2", "Sommer2024!", "tr0ub4dor&3"; not "1Password", "JIRA-4821", "v2.14.3")."""
    if not 6 <= len(value) <= 64 or any(c in value for c in "/\\") or _ADDRESS.search(value):
        return False
    letters = any(c.isalpha() for c in value)
    digits = any(c.isdigit() for c in value)
    symbols = any(c.isascii() and not c.isalnum() and not c.isspace() and c not in "_-.'`" for c in value)
    if not letters or not (digits or symbols):
        return False
    if _TICKET.fullmatch(value) or _MEASURE.fullmatch(value) or _VERSION.fullmatch(value) or _REFERENCE.search(value):
        return False
    if _KEYWORD.fullmatch(value.strip("0123456789.,;:!?")):  # 1Password
        return False
    return not (_FILE.fullmatch(value) and not symbols and not value.split(".")[-1].isdigit())


_COMBINATION = re.compile(r"\d{1,3}(?:-\d{1,3}){2,5}")


def _pin(value: str) -> bool:
    return (value.isdigit() and 4 <= len(value) <= 12) or bool(_COMBINATION.fullmatch(value))


def _is_credential(kind: str, value: str, quoted: bool, after: str | None, english: bool = True) -> bool:
    after = (after or "").lower().rstrip(".,;")
    if not value or value.lower() in ORDINARY or after in _UNITS or after == "than":
        return False  # "16 characters", "longer than yours"
    if not quoted and (_CALL.match(value) or _DESCRIPTIVE.fullmatch(value) or _REFERENCE.search(value)):
        return False  # code reading a secret (`token = fetch(limit=100)`), or "the password was refused"
    if kind == "pin":
        return _pin(value)
    if kind == "cvv":  # a card's security code: 3 or 4 digits
        return value.isdigit() and 3 <= len(value) <= 4
    if kind == "strong" and english:
        return len(value) >= 4 or (quoted and len(value) >= 3)
    if kind in ("strong", "login"):
        return password_shaped(value) or (kind == "strong" and (_pin(value) or (quoted and len(value) >= 4)))
    return len(value) >= 6 and any(c.isdigit() or c in "!@#$%^&*+=/~" for c in value)


def _words(window: str, start: int, n: int) -> list[str]:
    """The next `n` words; punctuation alone (", " in "my bank PIN, 4417,") is no word."""
    found = (m.group(0) for m in _WORD.finditer(window, start))
    return list(islice((w for w in found if any(c.isalnum() for c in w) or w in ("=", ":", "->", "/")), n))


def _follows(kind: str, words: list[str], english: bool = True) -> bool:
    """Whether words[0] is a credential (words[1], if any, tells "16 characters" from "hunter2")."""
    return bool(words) and _is_credential(kind, *_value(words[0]), words[1] if len(words) > 1 else None, english)


def _title(keyword: re.Match[str], text: str, value: str) -> bool:
    """ "The Password is Courage": a capitalised keyword inside a sentence and a capitalised plain
    word make a title, not a statement."""
    start = keyword.start()
    at_start = start == 0 or text[:start].rstrip()[-1:] in ("", ".", "!", "?", ":", "\n")
    return not at_start and keyword.group(0)[:1].isupper() and value[:1].isupper() and value.isalpha()


def _comparison(words: list[str]) -> bool:
    return words[0].isalpha() and any(w.lower() == "than" for w in words[1:5])


def _after(kind: str, keyword: re.Match[str], text: str) -> str | None:
    """The value a keyword is followed by: "password: x", "PIN 4821", "the password for y is x"."""
    window = text[keyword.end() : keyword.end() + _WINDOW]
    if kind == "phrase":
        words = [_value(w)[0] for w in _words(window, 0, 14) if w not in (":", "=")]
        words = words[1:] if words and words[0].lower() in _VERBS else words
        return " ".join(words[:12]) if len(words) >= 12 and all(w.isalpha() and w.islower() for w in words[:12]) else None
    assigned = _ASSIGNED.match(window)
    if assigned:  # password: hunter2, "password": "hunter2", pwd=hunter2
        words = _words(window, assigned.end(), 4)
        if len(words) >= 3 and words[1] == "/":
            words = words[2:]  # "creds: deploy / Dpl0y#pw": a user name, then the password
        return _value(words[0])[0] if _follows(kind, words[:2]) else None
    words = _words(window, 0, 10)
    if not words or words[0].lower().strip(".,;:") in _COMPOUNDS:
        return None
    first = _value(words[0])[0]
    if kind in ("pin", "strong", "cvv") and any(c.isdigit() for c in first) and _follows(kind, words[:2]):
        return first  # "PIN 4821", "my passcode 771234"
    if kind == "weak" and len(first) >= 12 and classes(first) >= 2 and _follows(kind, words[:2]):
        return first  # "api key 4f9c2a7e1b8d3f60"
    for i, word in enumerate(words[:8]):
        lower = word.lower()
        if lower in _VERBS or word.endswith(":"):
            rest = words[i + 1 :]
            while rest and rest[0].lower() in _FILLERS | {"be"}:
                rest = rest[1:]  # "happens to be", "is just"
            if len(rest) >= 3 and rest[1] == "/":
                rest = rest[2:]  # "admin / Stag1ng!pass": a user name, then the password
            english = lower in _ENGLISH_VERBS or word.endswith(":")
            if rest and _comparison(rest):
                return None  # "easier to remember than a random password"
            if rest and _follows(kind, rest[:2], english) and not (kind == "strong" and _title(keyword, text, rest[0])):
                return _value(rest[0])[0]
            return None
        if word[-1] in _ENDS:
            return None  # the sentence ended without saying what the password is
    return None


# A password-shaped word or a PIN-like number near its keyword, before or after it, in one sentence.
_NEAR_WORDS = 8
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)|\n")
_NOT_A_PIN_BEFORE = _word_set(
    "in since after before every until from to by at on room flight order invoice number no nr seit nach bis "
    "vor alle depuis après avant en desde después antes cada dal dopo prima ogni sinds na voor elke"
)


def _near(kind: str, keyword: re.Match[str], text: str) -> str | None:
    left = text[max(0, keyword.start() - _WINDOW) : keyword.start()]
    right = text[keyword.end() : keyword.end() + _WINDOW]
    ends = list(_SENTENCE_END.finditer(left))
    before = left[ends[-1].end() :] if ends else left
    stop = _SENTENCE_END.search(right)
    after = right[: stop.start()] if stop else right
    words = before.split()[-_NEAR_WORDS:] + [None] + after.split()[:_NEAR_WORDS]
    for i, word in enumerate(words):
        if word is None:
            continue
        value = _value(word)[0]
        if kind == "pin":
            previous = words[i - 1] if i else None
            following = words[i + 1] if i + 1 < len(words) else None
            if (
                _pin(value)
                and (previous or "").lower() not in _NOT_A_PIN_BEFORE
                and (following or "").lower().rstrip(".,;") not in _UNITS
            ):
                return value
        elif password_shaped(value) and value.lower() not in ORDINARY:
            return value
    return None


# `NAME=value` and `NAME: value` where the name holds a credential word: SMTP_PASSWORD=mailpw2024,
# OPENAI_API_KEY=..., db_pass: hunter2 (a value after `=` follows it directly, as in an .env file).
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z][A-Za-z0-9]{0,30}(?:[_.-][A-Za-z0-9]{1,30}){1,6})"
    r"(?:=|\s{0,2}:\s{0,2})(?P<value>\"[^\"\n]{1,200}\"|'[^'\n]{1,200}'|[^\s\"'(\[{<$%][^\s]{2,200})"
)
_NAME_PARTS = re.compile(r"[_.-]")
_CREDENTIAL_PARTS = _word_set("password passwd pass pwd pw secret token pin passcode passphrase credentials creds apikey")
_KEY_QUALIFIERS = _word_set("api secret access private signing encryption master license auth client")


def _assignments(text: str) -> Iterator[Finding]:
    for match in _ASSIGNMENT.finditer(text):
        parts = [p.lower() for p in _NAME_PARTS.split(match.group("name"))]
        credential = any(p in _CREDENTIAL_PARTS for p in parts) or any(
            p in ("key", "keys") and i and parts[i - 1] in _KEY_QUALIFIERS for i, p in enumerate(parts)
        )
        value, quoted = _value(match.group("value"))
        if not credential or len(value) < 3 or value.lower() in ORDINARY or _REFERENCE.search(value):
            continue
        if _CALL.match(value) and not quoted:
            continue
        kind = "pin" if "pin" in parts else "strong"
        if kind == "pin" and not _pin(value):
            continue
        yield "a password or secret", value


# "482913 unlocks my phone", "5521 opens the front door"
_UNLOCKS = re.compile(
    r"(?i)(?<![\w.,/-])(\d{4,12})(?![\w.,/-]|[.,]\d)\s{1,3}(?:\w{1,12}\s{1,3}){0,2}"
    r"(?:unlocks?|opens?|disarms?|entsperrt|öffnet|ouvre|déverrouille|abre|desbloquea|sblocca|apre|ontgrendelt)\b"
)


# An Indian postal PIN code: six digits after "PIN code" with an address around them ("for
# Koramangala, Bangalore", "400050, Bandra West", "Road", "delivery") or after "pincode".
_POSTAL_WORDS = re.compile(
    r"(?i)\b(?:post(?:al)?|address|deliver(?:y|ed)?|ship(?:ping)?|courier|city|district|state|india|gpo|road|nagar|"
    r"street|colony|sector|locality|area|village|town|taluk|mandal)\b"
)
_PLACE_AFTER = re.compile(r"\s{0,2}[,(]\s{0,2}[A-Z][a-z]")
_PLACE_BEFORE = re.compile(r"\b(?:for|of|in)\s{1,3}[A-Z][a-z]")


def _postal(keyword: re.Match[str], text: str, value: str) -> bool:
    if not (len(value) == 6 and value.isdigit() and value[0] != "0"):
        return False
    if keyword.group(0).lower() == "pincode":
        return True
    start = max(0, keyword.start() - _WINDOW)
    around = text[start : keyword.end() + _WINDOW]
    at = text.find(value, keyword.end())
    return bool(
        _POSTAL_WORDS.search(around)
        or (at >= 0 and _PLACE_AFTER.match(text, at + len(value)))
        or _PLACE_BEFORE.search(text, keyword.end(), at if at >= 0 else keyword.end() + _WINDOW)
    )


def stated(text: str) -> Iterator[Finding]:
    for keyword in _KEYWORD.finditer(text):
        kind = keyword.lastgroup or "weak"
        value = _after(kind, keyword, text)
        if value is None and kind in ("strong", "login", "pin"):
            value = _near(kind, keyword, text)
        if value is not None and kind == "pin" and _postal(keyword, text, value):
            continue
        if value is not None:
            yield "a password or secret", value
    yield from _assignments(text)
    for match in _UNLOCKS.finditer(text):
        yield "a password or secret", match.group(1)
