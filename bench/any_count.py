"""How many of the core's function signatures say `Any` (issue 28, item 4).

Counts, over every function and method in layers/core/engram, each parameter annotation and each
return annotation that says `Any` (`Any`, `dict[str, Any]`, `Callable[..., Any]`, `typing.Any`), or
names a type alias of the core whose value says it (`type TurnState = dict[StateKey[Any], object]`):
a new name for `Any` does not lower the count. A signature typed with `Any` is one mypy cannot
check a call through; tests/unit/test_any_ratchet.py keeps the count from rising.

    python -m bench.any_count            # the total
    python -m bench.any_count --files    # and the count per file, largest first
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "layers" / "core" / "engram"


def _mentions_any(node: ast.AST, aliases: frozenset[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and (sub.id == "Any" or sub.id in aliases):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "Any" in sub.value:
            return True  # a quoted annotation
    return False


def any_aliases(root: Path = CORE) -> frozenset[str]:
    """Module-level type aliases of the core whose value says `Any` (`X = dict[str, Any]`,
    `X: TypeAlias = ...`, `type X = ...`), found until no new one appears (an alias of an alias)."""
    found: set[str] = set()
    candidates: list[tuple[str, ast.expr]] = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.TypeAlias) and isinstance(node.name, ast.Name):
                candidates.append((node.name.id, node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                if "TypeAlias" in ast.unparse(node.annotation):
                    candidates.append((node.target.id, node.value))
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Subscript, ast.BinOp))  # a generic type, or a union
            ):
                candidates.append((node.targets[0].id, node.value))
    while True:
        new = {name for name, value in candidates if name not in found and _mentions_any(value, frozenset(found))}
        if not new:
            return frozenset(found)
        found |= new


def _says_any(annotation: ast.expr | None, aliases: frozenset[str] = frozenset()) -> bool:
    if annotation is None:
        return False
    return _mentions_any(annotation, aliases)


def count_file(path: Path, aliases: frozenset[str] = frozenset()) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = 0
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        args = fn.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        found += sum(_says_any(p.annotation, aliases) for p in params if p is not None)
        if not isinstance(fn, ast.Lambda):
            found += _says_any(fn.returns, aliases)
    return found


def count(root: Path = CORE) -> Counter[str]:
    """Annotations saying `Any`, per file (relative to the core), over every function signature."""
    aliases = any_aliases(root)
    return Counter({str(p.relative_to(root)): n for p in sorted(root.rglob("*.py")) if (n := count_file(p, aliases))})


def main(argv: list[str]) -> None:
    per_file = count()
    if "--files" in argv:
        for name, n in per_file.most_common():
            print(f"{n:5d}  {name}")
    print(f"{sum(per_file.values())} annotations saying Any in the core's function signatures")


if __name__ == "__main__":
    main(sys.argv[1:])
