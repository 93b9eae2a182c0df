"""The word for "password" in every language Django's and django-allauth's translators maintain
(their `auth` / `allauth` catalogues' translations of "Password" and "password"): 90+ languages,
Polish "hasło", Japanese "パスワード", Turkish "parola" and "şifre", Korean "비밀번호", ...

The layer carries the words as `password_words.json` (no Django at run time); the file is made from
the installed catalogues with `python -m engram.secrets.words`, and a test checks that it still
matches them (tests/unit/test_secret_words.py), so a new language in either package is one rerun."""

from __future__ import annotations

import functools
import json
import re
import sys
from importlib.util import find_spec
from pathlib import Path

WORDS_FILE = Path(__file__).with_name("password_words.json")
# The catalogues read: (package, folder of the app inside it).
CATALOGUES = (("django", "contrib/auth/locale"), ("allauth", "locale"))
_ENTRY = re.compile(r'\nmsgid "[Pp]assword"\nmsgstr "([^"]+)"')


def from_catalogues() -> dict[str, list[str]]:
    """Language code -> its words for "password" (lower case, sorted), from the installed packages."""
    words: dict[str, set[str]] = {}
    for package, folder in CATALOGUES:
        spec = find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"{package} is not installed (requirements-dev.txt)")
        root = Path(next(iter(spec.submodule_search_locations))) / folder
        for po in sorted(root.glob("*/LC_MESSAGES/django.po")):
            language = po.parent.parent.name
            for match in _ENTRY.finditer(po.read_text(encoding="utf-8")):
                word = " ".join(match.group(1).split()).lower()
                if word and word != "password" or language.startswith("en"):
                    words.setdefault(language, set()).add(word)
    return {language: sorted(found) for language, found in sorted(words.items())}


@functools.cache
def password_words() -> frozenset[str]:
    """Every language's words for "password" (English's too), lower case."""
    table: dict[str, list[str]] = json.loads(WORDS_FILE.read_text(encoding="utf-8"))
    return frozenset(word for words in table.values() for word in words)


if __name__ == "__main__":
    WORDS_FILE.write_text(json.dumps(from_catalogues(), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{WORDS_FILE}: {len(password_words.__wrapped__())} words", file=sys.stderr)
