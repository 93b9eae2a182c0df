"""`make bench` (the `engram` command): how long a person waits, on a pseudo-terminal as in a shell.

- `engram --help` until it has printed and exited;
- `engram chat <agent>` until the `you> ` prompt shows (aim: under 300 ms; the client, httpx2 and
  websockets are imported and the socket opened in the background while the person types);
- from typing the first line at once at the prompt until the reply's first text shows (the
  background connect, a ticket, the socket, the turn on the offline model).

Each the median of N runs, against the local stack (offline model) with a fresh config.

    python -m bench.cli [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    from engram_client import Client
    from local.stack import start_stack
    from tests.terminal import Terminal, engram_command

    handle = start_stack(port=0, model_provider="offline", retry_delay=1)
    try:
        url = handle.url.rstrip("/")
        with Client(url, "dev-bench-cli") as engram:
            agent = engram.create_agent(name="Bench")
        with tempfile.TemporaryDirectory() as home:
            env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
            env.update(ENGRAM_URL=url, ENGRAM_API_KEY="dev-bench-cli", XDG_CONFIG_HOME=home, HOME=home, TERM="dumb")
            helps, prompts, replies = [], [], []
            for _ in range(args.runs):
                start = time.perf_counter()
                Terminal(engram_command() + ["--help"], env).wait()
                helps.append(time.perf_counter() - start)

                start = time.perf_counter()
                chat = Terminal(engram_command() + ["chat", agent["id"]], env)
                chat.expect("you> ")
                prompts.append(time.perf_counter() - start)
                start = time.perf_counter()
                chat.type("hello\n")
                chat.expect("Bench> ")
                replies.append(time.perf_counter() - start)
                chat.expect("you> ")
                chat.type("/quit\n")
                chat.wait()
    finally:
        handle.stop()

    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"

    print(f"== the engram command on a pseudo-terminal ({args.runs} runs each; local stack, offline model)")
    print(f"engram --help, start to exit              {ms(helps)}")
    print(f"engram chat, start to the prompt          {ms(prompts)} (aim < 300 ms)")
    print(f"first line typed at once -> reply's text  {ms(replies)} (connect in the background, ticket, socket, turn)")


if __name__ == "__main__":
    main()
