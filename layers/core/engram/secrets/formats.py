"""Known key formats: ours (Anthropic, OpenAI-style `sk-` keys, Google, fine-grained GitHub
tokens, keys split by whitespace, credentials in URLs), detect-secrets' format plugins used as a
library (every repetition bounded), PEM bodies and Luhn-valid card numbers."""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Callable, Iterator

from engram.secrets.text import Finding, classes


def _body(chars: str, n: int) -> str:
    """`n` characters of the class `chars`, any two of them separated by up to 3 whitespace characters."""
    return rf"[{chars}](?:\s{{0,3}}[{chars}]){{{n - 1}}}"


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
    return _split_like_a_key(match) and any(c.isdigit() for c in body) and classes(body) >= 2


Rule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool] | None]

# Ours: formats detect-secrets lacks (Anthropic, OpenAI project keys, Google, fine-grained GitHub
# tokens, Stripe test and webhook keys), keys split by whitespace (the library reads one unbroken
# token), any PEM header, and credentials in any URL's userinfo or query.
KNOWN: list[Rule] = [
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


def _value_of(match: re.Match[str]) -> str:
    """The secret in a match: our `secret` group, or the library's one group where it captures the
    value (not a prefix such as GitHub's "ghp"), else the whole match."""
    if "secret" in match.re.groupindex:
        return match.group("secret")
    group = match.group(1) if match.re.groups == 1 else None
    return group if group and len(group) >= 8 else match.group(0)


def known(text: str) -> Iterator[Finding]:
    for label, pattern, accept in [*KNOWN, *library_rules()]:
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


def cards(text: str) -> Iterator[Finding]:
    for match in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", match.group(0))
        if 13 <= len(digits) <= 19 and luhn(digits):
            yield "a payment card number", digits


# A PEM body without its header: base64 whose first bytes are a DER sequence with a long-form length
# (keys, and also certificates, which are rarely pasted bare) or an OpenSSH private key.
_PEM_BODY = re.compile(r"(?<![A-Za-z0-9+/])(?:MI[GIJ]|MH[cQ]|b3BlbnNzaC1rZXktdjE)[A-Za-z0-9+/]{40,4096}")


def pem_bodies(text: str) -> Iterator[Finding]:
    for match in _PEM_BODY.finditer(text):
        head = base64.b64decode(match.group(0)[:24])
        if head.startswith(b"openssh-key-v1") or (head[0] == 0x30 and head[1] in (0x81, 0x82, 0x83, 0x77, 0x74)):
            yield "a private key", match.group(0)
