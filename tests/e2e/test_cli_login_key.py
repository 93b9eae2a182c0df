"""`engram login` takes the key from the prompt, standard input or a file, never from the command
line, where `ps` and the shell's history would show it (MX6)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.e2e.test_mcp_server_http import _key
from tests.terminal import engram_command


@pytest.fixture
def person_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path))
    return env


def _login(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(engram_command() + ["login", *args], input=stdin, capture_output=True, text=True, env=env, timeout=60)


def _stored(env: dict[str, str]) -> dict[str, str]:
    with open(os.path.join(env["XDG_CONFIG_HOME"], "engram", "config.json"), encoding="utf-8") as file:
        return json.load(file)


def test_the_key_from_standard_input_or_a_file(live, person_env, tmp_path):
    url = live.url.rstrip("/")
    key = _key(url, user="cli-login")
    done = _login(["--url", url, "--key", "-"], person_env, stdin=key + "\n")
    assert done.returncode == 0, done.stderr
    assert _stored(person_env)["apiKey"] == key
    piped = _login(["--url", url], person_env, stdin=key + "\n")  # no --key, stdin not a terminal
    assert piped.returncode == 0, piped.stderr
    path = tmp_path / "key.txt"
    path.write_text(key + "\n", encoding="utf-8")
    from_file = _login(["--url", url, "--key", str(path)], person_env)
    assert from_file.returncode == 0, from_file.stderr
    assert key not in done.stdout + piped.stdout + from_file.stdout


def test_the_key_itself_on_the_command_line_is_refused(live, person_env):
    url = live.url.rstrip("/")
    key = _key(url, user="cli-login")
    done = _login(["--url", url, "--key", key], person_env)
    assert done.returncode != 0
    assert "not the key itself" in done.stderr and key not in done.stderr
    assert not os.path.exists(os.path.join(person_env["XDG_CONFIG_HOME"], "engram", "config.json"))
    missing = _login(["--url", url, "--key", "/nonexistent/key"], person_env)
    assert missing.returncode != 0 and "cannot read the key from /nonexistent/key" in missing.stderr
