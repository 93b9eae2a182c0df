"""Composition roots: each Lambda function builds exactly the dependencies it needs, once per
container, and hands them down explicitly (no global locator).

- the containers they fill are `engram.wiring.Stores` (the api function's) and `ModelDeps`;
  the chat, heartbeat and extract functions get ModelDeps.
- `api`, `chat`, `heartbeat`, `extract`: one `build(settings)` per function.
- `function.FunctionRoot`: the holder a function's app module keeps (built lazily on the first
  invocation; the local stack and the tests hand it prebuilt dependencies).
"""
