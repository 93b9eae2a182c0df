"""The console's vendored Markdown renderer and sanitiser (layers/console-vendor): the files in
static/ are the ones `npm run vendor` copied from the versions package-lock.json pins, byte for
byte (vendored.json records their hashes), so a hand edit or a stale copy fails here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENDOR = ROOT / "layers" / "console-vendor"
STATIC = ROOT / "layers" / "core" / "engram" / "console" / "static"


def test_vendored_files_match_the_lockfile_and_their_recorded_hashes() -> None:
    manifest = json.loads((VENDOR / "vendored.json").read_text())
    lock = json.loads((VENDOR / "package-lock.json").read_text())["packages"]
    declared = json.loads((VENDOR / "package.json").read_text())["dependencies"]
    assert {m["package"] for m in manifest.values()} == set(declared)
    for name, entry in manifest.items():
        assert lock[f"node_modules/{entry['package']}"]["version"] == entry["version"] == declared[entry["package"]]
        body = (STATIC / name).read_bytes()
        assert hashlib.sha256(body).hexdigest() == entry["sha256"], f"{name} differs from what `npm run vendor` wrote"
        installed = VENDOR / "node_modules" / entry["package"] / entry["from"]
        if installed.exists():  # after `npm ci`: the copy is the package's file (its source-map comment dropped)
            assert installed.read_text().startswith(body.decode().rstrip("\n"))
