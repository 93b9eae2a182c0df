"""axe-core (pinned in layers/console-vendor/package-lock.json, a devDependency there) run in the
page: `npm ci` installs it when the lockfile changed, as tests/mcp_matrix does for its server."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

VENDOR = Path(__file__).resolve().parents[2] / "layers" / "console-vendor"
SERIOUS = ("serious", "critical")


def axe_source() -> str:
    lock = VENDOR / "package-lock.json"
    stamp = VENDOR / "node_modules" / ".lock-sha256"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        npm = shutil.which("npm")
        assert npm, "node and npm are needed for axe-core (layers/console-vendor)"
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=VENDOR, check=True)
        stamp.write_text(digest)
    return (VENDOR / "node_modules" / "axe-core" / "axe.min.js").read_text()


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe's serious and critical WCAG 2 A/AA violations on the page as it is now."""
    page.evaluate(axe_source())
    result = page.evaluate(
        "async () => (await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })).violations"
        ".map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(' ')).slice(0, 5) }))"
    )
    return [v for v in result if v["impact"] in SERIOUS]
