"""The core's import directions (docs/ARCHITECTURE.md, "Packages and import directions"), checked
on the source: every import counts, including those inside functions and under TYPE_CHECKING.

Layers, lowest first; a module may import its own layer or a lower one, never a higher one:
  0 kernel            errors, ids, settings, observability, validation, base models; and
    secrets           the secret rules, which the kernel calls (they import nothing of Engram)
  1 aws               the one AWS adapter: table helper, keys, clients, queues
  2 models, ports     each feature's `models` (the domain vocabulary) and `ports` (the typed
                      Protocols of its repositories, which services and the engine see), and
                      pure domain rules (runs.expressions: schedule expressions)
  3 stores            each feature's `repository` (and the S3 transcripts, archive, scheduler)
  4 engine            turn, tool loop, prompt, tool registry, providers
  5 wiring            the typed containers services receive (Stores, ModelDeps)
  6 features          services, tools, prompt sections, turn policies, the HTTP kernel
  7 routes            powertools routers
  8 roots             one composition root per function
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "layers" / "core"
STORES = {
    "engram.recall.archive",
    "engram.conversations.transcripts",
    "engram.runs.schedules",
    "engram.account.objects",
    "engram.apikeys.oauth_clients",  # the RFC 7591 registrations' rows and their sweep
    "engram.runs.traces",  # the runs' timelines (OB1)
    "engram.runs.admission",  # a queued turn's admission (ST4, ST7)
}
# Pure domain rules beside the models (no I/O): the schedule-expression parser the API and the
# local schedule loop share.
DOMAIN_RULES = {"engram.runs.expressions", "engram.usage.totals", "engram.usage.limits"}
# What the engine may know of the features: the records a turn reads and writes.
ENGINE_MAY_IMPORT = {
    "engram.agents.models",
    "engram.runs.models",
    "engram.usage.models",
    # the spending limits a turn checks (TL10) and the usage totals' metrics, pure; their read's port
    "engram.usage.limits",
    "engram.usage.totals",
    "engram.usage.ports",
    # the ports of the stores a turn reads and writes (typed; the engine never sees a repository)
    "engram.agents.ports",
    "engram.conversations.ports",
    "engram.conversations.models",
    "engram.runs.ports",
    # the turn's deadline, applied to every AWS call made on its behalf
    "engram.aws.deadline",
    # the Anthropic key from the stack's secret (also read by the health check)
    "engram.aws.model_key",
}
# Imports inside functions keep something heavy off a cold start; each is listed here with its reason.
DEFERRED = {
    ("engram.aws.clients", "boto3"): "boto3 is imported with the first client, not with the module",
    ("engram.aws.clients", "botocore.config"): "as boto3",
    (
        "engram.aws.clients",
        "botocore.exceptions",
    ): "as boto3: `aws.clients.ClientError`, read by an `except` clause when an exception reaches it (~21 M instructions)",
    ("engram.aws.items", "boto3.dynamodb.types"): "as boto3: the codecs are built on first use",
    (
        "engram.engine.providers",
        "engram.engine.providers.anthropic_provider",
    ): "the anthropic SDK (~1.5 s) only with a model call",
    ("engram.engine.providers", "engram.engine.providers.offline"): "the offline model only where it is configured",
    ("engram.aws.model_key", "aws_lambda_powertools.utilities"): "Parameters only when the key is read",
    (
        "engram.kernel.validation",
        "engram.kernel.secrets",
    ): "the secret detector's patterns compile with the first write checked, not with the api's import (most requests read)",
    ("engram.aws.snapstart", "boto3"): "as boto3: imported when a snapshot is primed, not with the module",
    ("engram.kernel.secrets", "engram.secrets.matcher"): "the rules (a hundred compiled patterns) with the first check",
    (
        "engram.secrets.text",
        "confusable_homoglyphs.confusables",
    ): "the confusables table (~60 ms to load) is read with the first non-ASCII text checked",
    (
        "engram.secrets.formats",
        "detect_secrets.plugins",
    ): "detect-secrets' plugins (~170 ms, requests included) load with the first write checked",
    ("engram.aws.snapstart", "snapshot_restore_py"): "Lambda's runtime hooks, present on its managed runtimes only",
    (
        "engram.connections.tools",
        "engram.connections.mcp_client",
    ): "the MCP SDK and its HTTP stack only with a turn that lists or calls MCP tools",
    ("engram.connections.probe", "engram.connections.mcp_client"): "as connections.tools: only when a connection is tested",
    (
        "engram.connections.tools",
        "engram.connections.mcp_http",
    ): "as engram.connections.mcp_client: the HTTP under it, with a turn's first MCP failure",
    ("engram.connections.probe", "engram.connections.mcp_http"): "as connections.tools: only when a connection is tested",
    ("engram.connections.source", "engram.connections.mcp_client"): "as connections.tools: only when a turn lists tools",
    ("engram.connections.source", "engram.connections.mcp_http"): "as connections.tools: only when a turn lists tools",
    ("engram.connections.mcp_client", "jsonschema"): "the schema checker only for a result whose tool has an output schema",
    (
        "engram.connections.oauth",
        "engram.connections.oauth_http",
    ): "httpx2 only when an OAuth connection is authorised, refreshed or revoked (TL9), never on the api's import",
    (
        "engram.connections.egress",
        "httpcore2",
    ): "the guarded network backend is built with the first MCP session (the api checks URLs only)",
    ("engram.connections.egress", "anyio"): "as httpcore2: resolving names only when connecting",
    (
        "engram.aws.snapstart",
        "engram.kernel.secrets",
    ): "the secret detector, warmed when a snapshot is primed, not with the module",
    ("engram.aws.snapstart", "engram.secrets.formats"): "as engram.kernel.secrets: the rules it counts",
    (
        "engram.mcp_server.routes",
        "engram.mcp_server.server",
    ): "the MCP SDK (and starlette) only for POST /mcp, never for the api's other routes",
    ("engram.apikeys.authorizer", "jwt"): "PyJWT and cryptography only with the first JWT: callers with API keys never load them",
    (
        "engram.apikeys.authorizer",
        "urllib.request",
    ): "as jwt: urllib.request (http.client, email: ~20 M instructions) with the first JWT's issuer discovery",
    ("engram.recall.analysis", "snowballstemmer"): "its package loads all 36 stemmers (~15 ms): with the first search's indexing",
    ("engram.recall.service", "engram.recall.index"): "the search index with the first archive search, not with the api's import",
    ("engram.wiring.stores", "engram.aws.sockets"): "the WebSocket pusher with the first push (the api never pushes)",
    ("engram.wiring.stores", "engram.aws.kms"): "the KMS box with the first connection auth value sealed or opened",
    (
        "engram.wiring.stores",
        "engram.runs.schedules",
    ): "EventBridge Scheduler and the expression parser (calendar) with the first schedule written",
    ("engram.runs.service", "engram.run_memory.store"): "the run scratchpad's code only for GET .../run-memory",
    ("engram.engine.timeline", "engram.kernel.otel"): "the OpenTelemetry SDK only where the stack exports traces (OB2)",
    (
        "engram.kernel.otel",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    ): "the OTLP exporter (protobuf, requests) only where traces go to an OTLP endpoint, not in the tests' in-memory replay",
    # Each repository (and its feature's models) with the first use of its store: a request to the
    # api function imports the ones it reads and writes, not all twenty (issue 33, item 7).
    **{
        ("engram.wiring.stores", repository): "a repository with its store's first use, not with every function's import"
        for repository in (
            "engram.account.objects",
            "engram.account.repository",
            "engram.agents.repository",
            "engram.apikeys.oauth_clients",
            "engram.apikeys.repository",
            "engram.approvals.repository",
            "engram.cards.repository",
            "engram.connections.repository",
            "engram.conversations.repository",
            "engram.extraction.repository",
            "engram.facts.repository",
            "engram.memory.repository",
            "engram.recall.archive",
            "engram.run_memory.repository",
            "engram.runs.admission",
            "engram.runs.repository",
            "engram.streaming.repository",
            "engram.usage.repository",
            "engram.conversations.transcripts",
        )
    },
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in (CORE / "engram").rglob("*.py"):
        name = ".".join(path.relative_to(CORE).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _target(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache  # the tree is parsed once for all the rules
def _imports(module: str) -> list[tuple[str, bool]]:
    """(imported name, inside a function) for every import statement of `module`."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(node) for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
            found += [(n if n in MODULES else node.module, id(node) in inside) for n in names]
        elif isinstance(node, ast.Import):
            found += [(a.name, id(node) in inside) for a in node.names]
    return found


@functools.cache
def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module in MODULES:
        for name, _ in _imports(module):
            target = _target(name) if name.startswith("engram") else None
            if target and target != module:
                edges[module].add(target)
    return edges


def layer(module: str) -> int:
    parts = module.split(".")
    area = parts[1] if len(parts) > 1 else ""
    if area in ("kernel", "secrets"):
        return 0
    if area == "aws":
        return 1
    if parts[-1] in ("models", "ports") or module in DOMAIN_RULES:
        return 2
    if parts[-1] == "repository" or module in STORES:
        return 3
    if area == "engine":
        return 4
    if area == "wiring":
        return 5
    if area == "roots":
        return 8
    if parts[-1] in ("routes", "chat_routes"):
        return 7
    return 6


def test_no_module_imports_a_higher_layer():
    wrong = [
        f"{module} (layer {layer(module)}) imports {target} (layer {layer(target)})"
        for module, targets in _edges().items()
        for target in targets
        if layer(target) > layer(module)
    ]
    assert wrong == []


def test_the_secret_rules_import_nothing_of_engram():
    edges = _edges()
    rules = [m for m in edges if m.startswith("engram.secrets")]
    assert len(rules) > 3 and [f"{m} imports {t}" for m in rules for t in edges[m] if not t.startswith("engram.secrets")] == []


def test_the_engine_knows_no_feature_but_the_records_a_turn_writes():
    wrong = [
        f"{module} imports {target}"
        for module, targets in _edges().items()
        if module.startswith("engram.engine")
        for target in targets
        if not target.startswith(("engram.engine", "engram.kernel")) and target not in ENGINE_MAY_IMPORT
    ]
    assert wrong == []


def test_only_the_composition_roots_import_them():
    assert [
        f"{m} imports {t}"
        for m, ts in _edges().items()
        if not m.startswith("engram.roots")
        for t in ts
        if t.startswith("engram.roots")
    ] == []


def test_there_is_no_import_cycle():
    edges = _edges()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_imports_inside_functions_are_the_listed_cold_start_deferrals():
    found = {(module, name) for module in MODULES for name, inside in _imports(module) if inside}
    assert found - set(DEFERRED) == set()


def test_the_layering_rules_see_every_module():
    # A guard for the test itself: the walk found the core and every area has a layer.
    assert len(MODULES) > 60 and {layer(m) for m in MODULES} == set(range(9))


# --- package level -------------------------------------------------------------------------------
# The shared layers every feature may use and that know no feature's service: the package rule is
# about the features themselves (engine and wiring are layered by the rules above).
NOT_FEATURES = {"kernel", "secrets", "aws", "engine", "wiring", "roots", "api"}


def package(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


def package_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which feature package imports which (every import counts, inside functions too)."""
    out: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = package(module)
        if source in NOT_FEATURES or module == "engram":
            continue
        for target in targets:
            dest = package(target)
            if dest != source and dest not in NOT_FEATURES and target != "engram":
                out.setdefault(source, set()).add(dest)
    return out


def package_cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The packages of each strongly connected group of more than one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.add(frozenset(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_there_is_no_cycle_between_feature_packages():
    # Broken in issue 28: facts <-> memory (inverse_recency is in aws.keys), agents <-> conversations
    # (DASHBOARD in kernel.ids, the dashboard session's item from the Sessions port), cards <-> runs
    # (a decision is read from a CardedRun), conversations <-> runs (the turn's commit reaches the
    # session through runs.ports.SessionCommits; a council builds its members' policies), and
    # conversations/runs <-> streaming (the roots give a turn its watchers: ModelDeps.watch).
    assert sorted(sorted(c) for c in package_cycles(package_edges(_edges()))) == []


def test_the_package_rule_fails_on_a_reintroduced_cycle():
    # A guard for the rule itself: facts importing memory again (as facts.service did for
    # inverse_recency) makes a cycle the test reports.
    edges = {module: set(targets) for module, targets in _edges().items()}
    edges["engram.facts.service"].add("engram.memory.repository")
    assert frozenset({"facts", "memory"}) in package_cycles(package_edges(edges))
    assert package_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}
