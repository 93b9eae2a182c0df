"""A command on a pseudo-terminal that is its controlling terminal, as a person's shell runs it:
os.openpty, and util-linux's `setsid --ctty` in the child (subprocess rather than pty.fork, which
is unsafe in a threaded process such as one running the local stack). `expect` waits for text on
the screen (escape sequences dropped), `type` types. Used by tests/e2e/test_cli_pty.py and
bench/cli.py."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")


def engram_command() -> list[str]:
    script = Path(sys.executable).parent / "engram"
    return [str(script)] if script.exists() else [sys.executable, "-m", "engram_client.cli"]


class Terminal:
    """A command on a pseudo-terminal: `expect` waits for text on the screen, `type` types."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.fd, tty = os.openpty()
        setsid = shutil.which("setsid")
        assert setsid, "util-linux's setsid is needed to give the command its terminal"
        self.process = subprocess.Popen([setsid, "--ctty", *args], stdin=tty, stdout=tty, stderr=tty, env=env, close_fds=True)
        os.close(tty)
        self.screen = b""

    def expect(self, text: str, timeout: float = 60) -> str:
        """Everything shown up to and including `text` (from the last expect on)."""
        want = text.encode()
        deadline = time.monotonic() + timeout
        while want not in self.screen:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{text!r} never appeared; the screen shows:\n{self.screen.decode(errors='replace')}")
        shown, self.screen = self.screen.split(want, 1)
        return (shown + want).decode(errors="replace").replace("\r\n", "\n")

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.fd, 4096)
        except OSError:  # the child has gone and closed the terminal
            return False
        self.screen += ANSI.sub(b"", chunk)
        return bool(chunk)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(0.05)
            code = self.process.poll()
            if code is not None:
                while self._read(0.05):  # what it printed last
                    pass
                os.close(self.fd)
                return code
        self.process.kill()
        raise AssertionError("the command did not exit")
