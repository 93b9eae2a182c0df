"""The secret detector on its corpus (tests/unit/data/secrets): recall and false-positive rate of
the part it was tuned on and of the held-out part written before the redesign, then issue 39's
two parts (other languages, passphrases, spaced keys, SSH fingerprints, postal PIN codes, npm
hashes: tuned on i39_dev, i39_heldout run at the end), what each part missed or flagged, the time per text, and the time of a first check (the library's rules and the
confusables table load then); then, where the LoCoMo data is (bench.locomo's default path), how
many of its ordinary chat turns are flagged.

    python -m bench.secrets
"""

from __future__ import annotations

import json
import time

from bench.locomo import DEFAULT_LOCOMO
from bench.memory_sections import ROOT  # its import puts the core on sys.path

CORPUS = ROOT / "tests" / "unit" / "data" / "secrets"


def main() -> None:
    started = time.perf_counter()
    from engram.kernel.secrets import find_secret

    find_secret("p\u0430ssword: warm-up")
    print(f"first check (imports, rules, confusables): {1000 * (time.perf_counter() - started):.0f} ms")
    for part in ("tune", "heldout", "i39_dev", "i39_heldout"):
        corpus = json.loads((CORPUS / f"{part}.json").read_text())
        texts = [s["text"] for s in corpus["secrets"]] + [n["text"] for n in corpus["lookalikes"]]
        started = time.perf_counter()
        missed = [s for s in corpus["secrets"] if find_secret(s["text"]) is None]
        flagged = [(n["text"], find_secret(n["text"])) for n in corpus["lookalikes"] if find_secret(n["text"])]
        per_text = (time.perf_counter() - started) / len(texts) * 1e6
        n_secrets, n_lookalikes = len(corpus["secrets"]), len(corpus["lookalikes"])
        print(
            f"{part:11} recall {1 - len(missed) / n_secrets:.3f} ({n_secrets - len(missed)}/{n_secrets}), "
            f"false positives {len(flagged)}/{n_lookalikes} ({len(flagged) / n_lookalikes:.3f}, "
            f"{60 * len(flagged) / n_lookalikes:.1f} per 60), {per_text:.0f} us per text"
        )
        for s in missed:
            print(f"  missed  [{s['form']}] {s['text'][:90]!r}")
        for text, kind in flagged:
            print(f"  flagged [{kind}] {text[:90]!r}")
    if DEFAULT_LOCOMO.exists():
        conversations = [c["conversation"] for c in json.loads(DEFAULT_LOCOMO.read_text())]
        turns = [t["text"] for c in conversations for v in c.values() if isinstance(v, list) for t in v if "text" in t]
        flagged_turns = [t for t in turns if find_secret(t)]
        print(f"LoCoMo dev chat turns flagged: {len(flagged_turns)} of {len(turns)}")
        for text in flagged_turns:
            print(f"  flagged {text[:90]!r}")


if __name__ == "__main__":
    main()
