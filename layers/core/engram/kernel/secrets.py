"""The one secret detector every write path uses (memory, facts, tools, extraction, run inputs, run
memory, learnings, session titles).

Memory is injected into prompts and exported; a secret stored there leaks. `find_secret` says what
kind of secret a text seems to hold, after the text is normalised the way a leak would be read back:

- Unicode NFKC (full-width `ｓｋ－ａｎｔ` is `sk-ant`), then format characters (zero-width spaces and
  joiners, soft hyphens, bidi controls, BOMs) removed, then look-alike letters folded to the Latin
  letter or digit they imitate (the UTS #39 confusables table, from confusable-homoglyphs): "pаssword"
  with a Cyrillic а reads "password", "АKIA..." reads "AKIA...";
- known key formats: detect-secrets' format plugins used as a library (AWS, GitHub, GitLab, Slack,
  Stripe, JWT, private keys, SendGrid, Twilio, Telegram, Discord, npm, PyPI, ...; not its keyword
  and entropy plugins, which flag sentences), with every repetition bounded; and ours for what it
  lacks or misses: Anthropic and OpenAI-style `sk-` keys whose body looks random (`sk-learn-...` is
  not), Google keys, fine-grained GitHub tokens, keys split by whitespace ("AKIA IOSF ODNN 7EXA MPLE"),
  credentials in a URL (`redis://:pw@host`, `?access_token=`), bare PEM bodies (base64 of a DER
  sequence or an OpenSSH key), Luhn-valid card numbers;
- statements, in English, German, French, Spanish, Italian, Portuguese and Dutch, in either order:
  "the password for the prod db is hunter2", "hunter2 is my password", "Mein Passwort ist
  Sonnenblume77", `SMTP_PASSWORD=mailpw2024`, "my bank PIN, 4417,", "482913 unlocks my phone". A
  password-shaped word (letters with digits or symbols) near a password word, a 4-12 digit number
  near a PIN word, a value after "is"/":"/"=" that is not an ordinary word;
- base64 and hex runs that decode to text are judged by that text;
- generic tokens: 20+ characters of the base64/URL-safe alphabet with upper case, lower case and a
  digit, and a Shannon entropy (bits per character) of at least 0.8 * log2(min(length, 64)), which
  random keys reach, and words shorter than 3 characters on average, which identifiers
  (`AbstractProxyFactoryBean2`) are not; runs of words two thirds of which look random are joined
  first: a key split by spaces.

Deliberately not flagged (documented in docs/ARCHITECTURE.md): pure hex (git SHAs, checksums), UUIDs,
our own ids (`run_01k...`), URLs without credentials, dates, prices, hex colours - they are ids or
data far more often than keys; a hex key is still caught after a keyword ("secret: 9f86d0...").

Every repetition in a pattern is bounded (a test checks ours and the library's, which are rewritten
with bounds when they are compiled) and every loop visits each character a bounded number of times,
so a scan is linear in the text's length. Callers check sizes first. The patterns, the library's
rules and the confusables table are built on the first check, not on import.
"""

from __future__ import annotations

import base64
import binascii
import functools
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


# --- known formats ---------------------------------------------------------------------------
def _body(chars: str, n: int) -> str:
    """`n` characters of the class `chars`, any two of them separated by up to 3 whitespace characters."""
    return rf"[{chars}](?:\s{{0,3}}[{chars}]){{{n - 1}}}"


_SPACE = re.compile(r"\s")


def _classes(text: str) -> int:
    return sum((any(c.isupper() for c in text), any(c.islower() for c in text), any(c.isdigit() for c in text)))


def _split_like_a_key(match: re.Match[str]) -> bool:
    """A match split by whitespace is a key cut into chunks, not a sentence after a prefix: every
    chunk but the last has 3+ characters and there is a digit ("AKIA IS THE PREFIX OF KEYS" is a
    sentence)."""
    pieces = match.group(0).split()
    return len(pieces) == 1 or (any(c.isdigit() for c in match.group(0)) and all(len(p) >= 3 for p in pieces[:-1]))


def _random_body(match: re.Match[str]) -> bool:
    """An `sk-` key's body is random: a digit and a second character class ("sk-learn-for-the-churn-
    model", a slug of "we use sk-learn for the churn model", is words)."""
    body = match.group(0)[3:]
    return _split_like_a_key(match) and any(c.isdigit() for c in body) and _classes(body) >= 2


Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool] | None]

# Ours: formats detect-secrets lacks (Anthropic, OpenAI project keys, Google, fine-grained GitHub
# tokens, Stripe test and webhook keys), keys split by whitespace (the library reads one unbroken
# token), any PEM header, and credentials in any URL's userinfo or query.
_KNOWN: list[Rule] = [
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
    ("an Anthropic API key", re.compile(r"\bsk-ant-(?:api|admin|oat)?" + _body(r"A-Za-z0-9_\-", 20)), _random_body),
    ("an API key", re.compile(r"\bsk-(?:proj-|live-|test-|svcacct-)?" + _body(r"A-Za-z0-9_\-", 20)), _random_body),
    ("a Stripe key", re.compile(r"\b(?:[rs]k_(?:live|test)_|whsec_)" + _body("A-Za-z0-9", 16)), _split_like_a_key),
    (
        "a GitHub token",
        re.compile(r"\b(?:gh[pousr]_" + _body("A-Za-z0-9", 36) + "|github_pat_" + _body("A-Za-z0-9_", 40) + ")"),
        _split_like_a_key,
    ),
    ("a Slack token", re.compile(r"\bxox[abposre]-" + _body("A-Za-z0-9-", 10)), _split_like_a_key),
    ("a Google API key", re.compile(r"\bAIza" + _body("0-9A-Za-z_-", 35)), _split_like_a_key),
    # userinfo with a password, the user name may be empty: postgres://u:p@h/db, redis://:pw@host
    ("a credential in a URL", re.compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://[^/\s:@]{0,256}:(?P<secret>[^/\s@]{1,256})@"), None),
    (
        "a credential in a URL",
        re.compile(
            r"(?i)[?&](?:access_token|api_?key|apikey|token|secret|password|passwd|sig|signature|x-amz-signature|"
            r"x-amz-credential|x-amz-security-token|client_secret)=[A-Za-z0-9%/+=_.~-]{8}"
        ),
        None,
    ),
]

LIBRARY_REPEAT = 512  # the bound put on the library's `+`, `*` and `{n,}`: longer than any key it names
_OPEN_REPEAT = re.compile(r"\{(\d{1,4}),\}")


def bounded(pattern: str, limit: int = LIBRARY_REPEAT) -> str:
    """`pattern` with every unbounded repetition (`+`, `*`, `{n,}`) bounded by `limit`, so a scan
    stays linear in the text's length whatever the rule."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif char == "[":  # a class: copied as is, `]` first in it is a literal
            end = i + 1 + (pattern[i + 1 : i + 2] == "^")
            end += pattern[end : end + 1] == "]"
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            out.append(pattern[i : end + 1])
            i = end + 1
        elif char in "+*" and out and out[-1] not in ("(", "|") and not out[-1].endswith(("+", "*", "}")):
            out.append(f"{{{int(char == '+')},{limit}}}")
            i += 1
        elif (open_repeat := _OPEN_REPEAT.match(pattern, i)) is not None:
            out.append(f"{{{open_repeat.group(1)},{limit}}}")
            i = open_repeat.end()
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _article(kind: str) -> str:
    return f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind}"


@functools.cache
def library_rules() -> list[Rule]:
    """detect-secrets' format rules, bounded, each with its own check where it has one (a JWT's parts
    must decode). Its regex plugins but: keyword and high-entropy (they flag sentences), artifactory
    (any 11+ letter word starting "AP" and a hex digit), ip_public (an address is not a credential)."""
    from detect_secrets.plugins import (
        aws,
        azure_storage_key,
        basic_auth,
        cloudant,
        discord,
        github_token,
        gitlab_token,
        ibm_cloud_iam,
        ibm_cos_hmac,
        jwt,
        mailchimp,
        npm,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        softlayer,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    plugins = (
        aws.AWSKeyDetector,
        azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector,
        cloudant.CloudantDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        ibm_cloud_iam.IbmCloudIamDetector,
        ibm_cos_hmac.IbmCosHmacDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        npm.NpmDetector,
        openai.OpenAIDetector,
        private_key.PrivateKeyDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        softlayer.SoftlayerDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
    )
    rules: list[Rule] = []
    for plugin in plugins:
        valid: Callable[[str], bool] | None = getattr(plugin, "is_formally_valid", None)
        accept = (lambda m, valid=valid: valid(m.group(0))) if valid else None
        for pattern in plugin.denylist:
            rules.append((_article(plugin.secret_type), re.compile(bounded(pattern.pattern), pattern.flags), accept))
    return rules


Finding = tuple[str, str]  # (what kind of secret, the text that is the secret)


def _value_of(match: re.Match[str]) -> str:
    """The secret in a match: our `secret` group, or the library's one group where it captures the
    value (not a prefix such as GitHub's "ghp"), else the whole match."""
    if "secret" in match.re.groupindex:
        return match.group("secret")
    group = match.group(1) if match.re.groups == 1 else None
    return group if group and len(group) >= 8 else match.group(0)


def _known(text: str) -> Iterator[Finding]:
    for label, pattern, accept in [*_KNOWN, *library_rules()]:
        for match in pattern.finditer(text):
            if accept is None or accept(match):
                yield label, _value_of(match)


# Card numbers: 13-19 digits, single spaces or dashes between groups, an issuer's first digit (2-6),
# and a valid Luhn check digit.
_CARD = re.compile(r"(?<![\w.,/-])[2-6](?:[ -]?\d){12,18}(?![\w/-]|[.,]\d)")


def luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _cards(text: str) -> Iterator[Finding]:
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and luhn(digits):
            yield "a payment card number", digits


# A PEM body without its header: base64 whose first bytes are a DER sequence with a long-form length
# (keys, and also certificates, which are rarely pasted bare) or an OpenSSH private key.
_PEM_BODY = re.compile(r"(?<![A-Za-z0-9+/])(?:MI[GIJ]|MH[cQ]|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/]{40,4096}")


def _pem_bodies(text: str) -> Iterator[Finding]:
    for match in _PEM_BODY.finditer(text):
        head = base64.b64decode(match.group(0)[:24])
        if head.startswith(b"openssh-key-v1") or (head[0] == 0x30 and head[1] in (0x81, 0x82, 0x83, 0x77, 0x74)):
            yield "a private key", match.group(0)


# --- statements: "the password for the prod db is hunter2", "hunter2 is my password" ----------
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


def password_shaped(value: str) -> bool:
    """Letters with digits or symbols, 6-64 characters, and not an address, a path, a file name, an id
    or a version ("hunter2", "Sommer2024!", "tr0ub4dor&3"; not "1Password", "JIRA-4821", "v2.14.3")."""
    if not 6 <= len(value) <= 64 or any(c in value for c in "/\\@") or "://" in value:
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
    if not value or value.lower() in _ORDINARY or (after or "").lower().rstrip(".,;") in _UNITS:
        return False
    if not quoted and (_CALL.match(value) or _DESCRIPTIVE.fullmatch(value) or _REFERENCE.search(value)):
        return False  # code reading a secret (`token = fetch(limit=100)`), or "the password was refused"
    if kind == "pin":
        return _pin(value)
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
    if kind in ("pin", "strong") and any(c.isdigit() for c in first) and _follows(kind, words[:2]):
        return first  # "PIN 4821", "my passcode 771234"
    if kind == "weak" and len(first) >= 12 and _classes(first) >= 2 and _follows(kind, words[:2]):
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
        elif password_shaped(value) and value.lower() not in _ORDINARY:
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
        if not credential or len(value) < 3 or value.lower() in _ORDINARY or _REFERENCE.search(value):
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


def _statement(text: str) -> Iterator[Finding]:
    for keyword in _KEYWORD.finditer(text):
        kind = keyword.lastgroup or "weak"
        value = _after(kind, keyword, text)
        if value is None and kind in ("strong", "login", "pin"):
            value = _near(kind, keyword, text)
        if value is not None:
            yield "a password or secret", value
    yield from _assignments(text)
    for match in _UNLOCKS.finditer(text):
        yield "a password or secret", match.group(1)


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


_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){12,2048}(?![0-9A-Fa-f])")


def _hex_decoded(run: str) -> str | None:
    """The text a hex run stands for, if it is printable ASCII (a git SHA or a checksum is not)."""
    raw = bytes.fromhex(run)
    return raw.decode("ascii") if raw.isascii() and all(32 <= b < 127 for b in raw) else None


def _findings(text: str, *, decode: bool) -> Iterator[Finding]:
    """Every secret in a normalised text, the cheapest checks first. A base64 or hex run that decodes
    to text is judged by that text alone (once: no encoding inside an encoding)."""
    yield from _known(text)
    yield from _cards(text)
    yield from _pem_bodies(text)
    yield from _statement(text)
    for run in _BASE64_RUN.finditer(text) if decode else ():
        inner = _decoded(run.group(0))
        if inner is not None:
            for label, value in _findings(inner, decode=False):
                yield f"{label} (base64-encoded)", value
    for run in _HEX_RUN.finditer(text) if decode else ():
        inner = _hex_decoded(run.group(0))
        if inner is not None:
            for label, value in _findings(inner, decode=False):
                yield f"{label} (hex-encoded)", value
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
    joined = _SPACE.sub("", plain)
    for value in values:
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", plain) or (len(value) >= 12 and value in joined):
            return True
    return False
