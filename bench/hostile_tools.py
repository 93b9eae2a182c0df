"""How many hostile tool outputs reach memory (TL4): `python -m bench.hostile_tools [--root PATH]`.

Every case of the hostile corpus (tests/data/hostile_tool_outputs.json, the dev corpus used while
designing the structured transcript, and hostile_tool_outputs_heldout.json, written afterwards
and run only at the end) is run two ways (tests/hostile.py):
- through the prompts: the extraction call and a summary fold over the case's run, answered by the
  offline model (every case: a tool result, a tool input, a reply quoting a tool);
- over HTTP: the local stack (offline model, HISTORY_CAP=4), a real MCP server on loopback
  serving the corpus, each tool-result case in a session of its own, its turn extracted, cut and
  summarised, then the memory rows, the user's facts and the summary searched.
Printed per corpus: the cases whose marker reached a memory row, a fact or the summary, and the
cases whose person's own fact (said in the same turn) was not remembered. `--root` runs the code of
another checkout (e.g. main before the change) with this corpus.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _line(label: str, reached: list[object]) -> str:
    hit = [r for r in reached if r.where]  # type: ignore[attr-defined]
    lost = [r for r in reached if not r.own_fact]  # type: ignore[attr-defined]
    kinds = {w: sum(1 for r in hit if w in r.where) for w in ("row", "fact", "summary")}  # type: ignore[attr-defined]
    return (
        f"{label:<28}{len(hit):>3} of {len(reached):<3} reached memory   "
        f"(row {kinds['row']}, fact {kinds['fact']}, summary {kinds['summary']})   own fact lost in {len(lost)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose code runs (default: this one)")
    args = parser.parse_args()
    root = args.root.resolve()
    sys.path[:0] = [str(root / "layers" / "core"), str(ROOT)]
    from tests.hostile import DEV, HELD_OUT, load, over_http, serve_corpus, through_the_prompts

    corpora = {"dev": load(DEV), "held-out": load(HELD_OUT)}
    print(f"== hostile tool outputs (TL4), code of {root}")
    for name, cases in corpora.items():
        print(_line(f"{name}: through the prompts", [through_the_prompts(c) for c in cases]))

    from local.stack import start_stack
    from tests.e2e.test_local_stack_http import http

    os.environ["HISTORY_CAP"] = "4"
    stack = start_stack(port=0, root=root, model_provider="offline", workers=False)
    try:
        for name, cases in corpora.items():
            server = serve_corpus(cases)
            try:
                url = stack.url.rstrip("/")
                reached = over_http(http, url, server.url, cases, lambda: stack.drain("ExtractQueue"), user=f"hostile-{name}")
            finally:
                server.stop()
            print(_line(f"{name}: over HTTP", reached))
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
