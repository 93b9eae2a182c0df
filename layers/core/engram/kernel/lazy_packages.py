"""Lazy package inits for two powertools packages whose `__init__` imports far more than the api
function uses (issue 33, item 7): `aws_lambda_powertools.event_handler` imports every resolver
(AppSync with asyncio, Bedrock agents, VPC Lattice...) and `...utilities.data_classes` every event
class (CodePipeline with zipfile, Kinesis, SES...): ~115 M instructions of the api function's
import (callgrind, bench.cold_start --instructions), although the HTTP resolver uses a few.

A package whose `__init__` only re-exports names of its submodules (docstring, `from .x import y`
and `__all__`, nothing else: checked on its source) is created empty; each name is imported from
its submodule when first read. Any other name (`__all__`, a name the source does not list) runs
the package's real `__init__` then, so every name the package has is still there, only later. A
package whose `__init__` does anything else is imported as it is."""

import ast
import importlib
import importlib.util
import sys
import threading
from collections.abc import Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType

PACKAGES = ("aws_lambda_powertools.event_handler", "aws_lambda_powertools.utilities.data_classes")


def reexports(source: str, package: str) -> dict[str, tuple[str, str]] | None:
    """{name: (submodule, its name there)} of an `__init__` that only re-exports; else None."""
    names: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin = importlib.util.resolve_name("." * node.level + node.module, package) if node.level else node.module
            if not origin.startswith(package + "."):
                return None
            names.update({(a.asname or a.name): (origin, a.name) for a in node.names if a.name != "*"})
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        elif not (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]):
            return None
    return names


class _LazyInit(Loader):
    def __init__(self, real: Loader, names: dict[str, tuple[str, str]]) -> None:
        self.real, self.names = real, names

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)  # get_source, is_package...: the real loader's

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default module, with __path__ set from the spec

    def exec_module(self, module: ModuleType) -> None:
        package, names, real = module.__name__, self.names, self.real
        whole = threading.Lock()

        def getattr_(name: str) -> object:
            if name in names:
                origin, attribute = names[name]
                value = getattr(importlib.import_module(origin), attribute)
                setattr(module, name, value)
                return value
            if not name.startswith("__"):
                try:
                    return importlib.import_module(f"{package}.{name}")
                except ModuleNotFoundError as missing:
                    if missing.name != f"{package}.{name}":
                        raise
            with whole:  # the real __init__, once: every name it defines is then set
                if module.__dict__.pop("__getattr__", None) is not None:
                    real.exec_module(module)
            return getattr(module, name)

        module.__dict__["__getattr__"] = getattr_


class _Finder(MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in PACKAGES:
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not spec.origin or not spec.origin.endswith("__init__.py"):
            return None
        with open(spec.origin, encoding="utf-8") as source:
            names = reexports(source.read(), fullname)
        if names is not None:
            spec.loader = _LazyInit(spec.loader, names)
        return spec


def install() -> None:
    """Before the packages' first import (engram's own `__init__`); once."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
