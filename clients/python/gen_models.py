"""Writes engram_client/models.py from docs/openapi.yaml: one TypedDict per component schema.

    .venv/bin/python clients/python/gen_models.py        # rewrite models.py
    .venv/bin/python clients/python/gen_models.py --check  # exit 1 when models.py is stale

tests/unit/test_client_drift.py runs the check, and also compares the models' field names and
required keys with the schema's properties and the client's operation table with the paths, so the
client cannot drift from the document. Needs PyYAML (a dev dependency, not the client's).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SPEC = HERE.parents[1] / "docs" / "openapi.yaml"
TARGET = HERE / "engram_client" / "models.py"

HEADER = '''"""The API's request and response shapes, generated from docs/openapi.yaml by
clients/python/gen_models.py: do not edit by hand (tests/unit/test_client_drift.py fails when this
file and the document disagree). Plain TypedDicts: a response is the decoded JSON itself.
No `from __future__ import annotations` here: TypedDict needs real annotations to tell required
keys from NotRequired ones, so a class is written after the classes it names."""

from typing import Any, Literal, NotRequired, TypedDict

'''

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None", "object": "dict[str, Any]"}


def load_spec(path: Path = SPEC) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as f:
        spec: dict[str, Any] = yaml.safe_load(f)
    return spec


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _alias_or_class(schemas: dict[str, Any], name: str) -> bool:
    """True when the schema becomes a TypedDict (an object with properties, or allOf of one)."""
    s = schemas[name]
    return "properties" in s or "allOf" in s


def py_type(schema: dict[str, Any], schemas: dict[str, Any]) -> str:
    if not schema:
        return "Any"
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return name if _alias_or_class(schemas, name) else py_type(schemas[name], schemas)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _union([py_type(s, schemas) for s in schema[key]])
    if "allOf" in schema:
        refs = [s for s in schema["allOf"] if "$ref" in s]
        return py_type(refs[0], schemas) if refs else "dict[str, Any]"
    if "enum" in schema:
        return _union([("None" if v is None else f"Literal[{v!r}]") for v in schema["enum"]])
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    t = schema.get("type")
    if isinstance(t, list):
        return _union([py_type({**schema, "type": one}, schemas) for one in t])
    if t == "array":
        return f"list[{py_type(schema.get('items', {}), schemas)}]"
    if t in SCALARS:
        return SCALARS[t]
    return "Any"


def _union(parts: list[str]) -> str:
    merged: list[str] = []
    literals: list[str] = []
    for p in parts:
        if p.startswith("Literal[") and p.count("Literal[") == 1:
            literals.append(p[len("Literal[") : -1])
        elif p not in merged:
            merged.append(p)
    if literals:
        merged.insert(0, f"Literal[{', '.join(literals)}]")
    if "Any" in merged:
        return "Any"
    if "None" in merged:  # None last reads best
        merged = [p for p in merged if p != "None"] + ["None"]
    return " | ".join(merged)


def _fields(schema: dict[str, Any], schemas: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    lines = []
    for field, prop in schema.get("properties", {}).items():
        t = py_type(prop, schemas)
        lines.append(f"    {field}: {t}" if field in required else f"    {field}: NotRequired[{t}]")
    return lines


# Answers the document describes inline (not as a component schema) get a class of this name.
INLINE_NAMES = {"searchArchive": "ArchivePage", "deleteConnection": "ConnectionDeleted", "getToolResult": "ToolResult"}


def inline_answers(spec: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """operationId -> (class name, schema) for each success answer whose `data` is an inline object."""
    found = {}
    for ops in spec["paths"].values():
        for method, op in ops.items():
            if method == "parameters":
                continue
            for status, answer in op.get("responses", {}).items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                for part in schema.get("allOf", []):
                    data = part.get("properties", {}).get("data", {})
                    if status.startswith("2") and "properties" in data:
                        op_id = op["operationId"]
                        found[op_id] = (INLINE_NAMES.get(op_id, op_id[0].upper() + op_id[1:] + "Data"), data)
    return found


def render(spec: dict[str, Any]) -> str:
    schemas = dict(spec["components"]["schemas"])
    for name, schema in inline_answers(spec).values():
        schemas[name] = {"description": f"The `{name}` answer (inline in the document).", **schema}
    out = [HEADER]
    done: set[str] = set()

    def emit(name: str) -> None:
        if name in done or not _alias_or_class(schemas, name):
            return
        s = schemas[name]
        bases = ["TypedDict"]
        body: list[str] = []
        if "allOf" in s:
            bases = []
            for part in s["allOf"]:
                if "$ref" in part:
                    base = _ref_name(part["$ref"])
                    emit(base)
                    bases.append(base)
                else:
                    body += _fields(part, schemas)
        else:
            body = _fields(s, schemas)
        for ref in _refs(s):  # the classes it names first
            if ref != name:
                emit(ref)
        done.add(name)
        doc = (s.get("description") or "").strip().splitlines()
        out.append(f"\nclass {name}({', '.join(bases)}):")
        out.append(
            f'    """{doc[0].replace(chr(92), "")}"""' if doc and '"""' not in doc[0] else f'    """The `{name}` schema."""'
        )
        out.extend(body)
        out.append("")

    for name in schemas:
        emit(name)
    return "\n".join(out).rstrip() + "\n"


def _refs(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        found = [_ref_name(schema["$ref"])] if "$ref" in schema else []
        for v in schema.values():
            found += _refs(v)
        return found
    if isinstance(schema, list):
        return [r for v in schema for r in _refs(v)]
    return []


def formatted(text: str) -> str:
    """As `ruff format` (the repository's formatter, a dev dependency) writes it."""
    import subprocess

    cmd = [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"]
    return subprocess.run(cmd, input=text, capture_output=True, text=True, check=True, cwd=HERE.parents[1]).stdout


def main(argv: list[str]) -> int:
    text = formatted(render(load_spec()))
    if "--check" in argv:
        if TARGET.read_text(encoding="utf-8") != text:
            print(f"{TARGET} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
