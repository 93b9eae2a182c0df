"""Where the `engram` command finds its stack and key: ENGRAM_URL and ENGRAM_API_KEY in the
environment first (scripts and CI), then the file `engram login` writes,
`$XDG_CONFIG_HOME/engram/config.json` (`~/.config/engram/config.json` without it), mode 0600."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

ENV_URL = "ENGRAM_URL"
ENV_KEY = "ENGRAM_API_KEY"


class Settings(NamedTuple):
    url: str | None
    api_key: str | None
    source: str  # where they came from, for messages: "environment", "config file", ...


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"  # the spec ignores a relative value
    return root / "engram" / "config.json"


def read_config(path: Path | None = None) -> dict[str, str]:
    path = path or config_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def write_config(url: str, api_key: str, path: Path | None = None) -> Path:
    """Store the URL and key readable by the user alone (0600 file, 0700 directory)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)  # an older file may have been wider
        json.dump({"url": url.rstrip("/"), "apiKey": api_key}, f, indent=2)
        f.write("\n")
    return path


def remove_config(path: Path | None = None) -> bool:
    try:
        (path or config_path()).unlink()
    except FileNotFoundError:
        return False
    return True


def resolve() -> Settings:
    """The URL and key to use: each from the environment when set there, else from the file."""
    stored = read_config()
    url = os.environ.get(ENV_URL) or stored.get("url")
    key = os.environ.get(ENV_KEY) or stored.get("apiKey")
    from_env = [n for n in (ENV_URL, ENV_KEY) if os.environ.get(n)]
    source = (
        ("environment" if len(from_env) == 2 else f"{' and '.join(from_env)} and {config_path()}")
        if from_env
        else str(config_path())
    )
    return Settings(url.rstrip("/") if url else None, key, source)
