"""The resolver the functions' apps are (`engram.api.http.build_app`): each request on its own
resolver's state, and routers included with the first request their prefixes claim (RouterSpec)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, CORSConfig
from aws_lambda_powertools.event_handler.api_gateway import BaseRouter, Router
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
    from aws_lambda_powertools.utilities.typing import LambdaContext


# The resolver serving the current invocation. A powertools Router is a module singleton that
# points at the resolver including it (`api_resolver`, set by include_router): one per process in
# Lambda, but the local stack runs a function's execution environments side by side in one
# process, each with its own resolver. Reading the pointer through the invocation's context makes
# the routers per environment: the environments' events never read each other's request. Outside
# a resolve a router has no resolver, so an app including it (an environment's import, perhaps
# while another environment serves a request) takes the router's own context, not the request
# state of the resolver that included it before (which held that request).
# Kept on the Router class, so that every copy of this module in a process (the local stack loads
# the core afresh for each stack) sets and reads the same variable.
_SERVING: ContextVar[BaseRouter | None] = getattr(Router, "_engram_serving", None) or ContextVar("engram_resolver", default=None)
Router._engram_serving = _SERVING  # type: ignore[attr-defined]


def _serving_resolver(router: Router) -> BaseRouter | None:
    return _SERVING.get()


def _include(router: Router, resolver: BaseRouter | None) -> None:
    """include_router's assignment: the resolve says which resolver serves (see `_SERVING`)."""


Router.api_resolver = property(_serving_resolver, _include)  # type: ignore[assignment]


class Resolver(APIGatewayHttpResolver):
    """Each resolve names itself the serving resolver of its context (see `_SERVING`) and keeps
    its event and Lambda context as its own: powertools stores them on the BaseRouter class (one
    per process), which concurrent environments would overwrite for each other."""

    def __init__(
        self, cors: CORSConfig | None, body_parser: Callable[[str], dict[str, object]], lazy: Sequence[RouterSpec] = ()
    ) -> None:
        super().__init__(enable_validation=True, json_body_deserializer=body_parser, cors=cors)
        self._waiting = tuple(lazy)  # replaced, never changed in place: read without the lock
        self._including = threading.Lock()
        if cors is not None:  # a preflight names every method of the app, included or not
            self._cors_methods.update(method for spec in lazy for method in spec.methods)

    def include_serving(self, method: str, path: str) -> None:
        """Includes the routers whose prefixes claim a request to `path`, once per app; a thread
        that asks for a router another is including waits for the whole of it."""
        if any(spec.serves(method, path) for spec in self._waiting):
            self._include_waiting(lambda spec: spec.serves(method, path))

    def include_all(self) -> None:
        """Every router not yet included: before a SnapStart snapshot, or the OpenAPI document
        (`get_openapi_schema` describes the routes included)."""
        self._include_waiting(lambda spec: True)

    def _include_waiting(self, wanted: Callable[[RouterSpec], bool]) -> None:
        with self._including:
            for spec in self._waiting:
                if wanted(spec):
                    self.include_router(spec.load())
                    self._waiting = tuple(other for other in self._waiting if other is not spec)

    def _resolve(self) -> ResponseBuilder[BaseProxyEvent]:
        self.include_serving(self.current_event.http_method.upper(), self._remove_prefix(self.current_event.path))
        return super()._resolve()

    def _to_proxy_event(self, event: dict[str, object]) -> BaseProxyEvent:
        proxy = super()._to_proxy_event(event)
        self.__dict__["current_event"] = proxy  # shadows the class attribute resolve sets
        return proxy

    def include_router(self, router: Router, prefix: str | None = None) -> None:
        """An environment imported while another serves a request (the local stack, one thread)
        takes the router's own context, not that request's state (its resolved `Request` among it,
        which the dependencies would read)."""
        token = _SERVING.set(None)
        try:
            super().include_router(router, prefix)
        finally:
            _SERVING.reset(token)

    def resolve(self, event: Mapping[str, object], context: LambdaContext) -> dict[str, object]:
        self.__dict__["lambda_context"] = context
        token = _SERVING.set(self)
        try:
            return super().resolve(event, context)
        finally:
            _SERVING.reset(token)


@dataclass(frozen=True)
class RouterSpec:
    """A router the app includes with the first request it serves, not with the function's import:
    `module` (which defines `router`) and the path prefixes its routes are under. A prefix is a
    path whose `*` segments stand for any one segment (`/api/agents/*/memories`), optionally
    after a method (`DELETE /api/me`: that method only); it claims the paths equal to it or under
    it. Every router whose prefix claims a request's path is included before the request is
    routed; so that the order routers are included in never matters, no route of one router may
    match a request another's route matches (tests/unit/test_lazy_routes.py)."""

    module: str
    prefixes: tuple[str, ...]
    methods: tuple[str, ...]  # of its routes: a CORS preflight names them before the router loads

    def serves(self, method: str, path: str) -> bool:
        segments = path.split("/")[1:]
        return any(_claims(prefix, method, segments) for prefix in self.prefixes)

    def load(self) -> Router:
        router = importlib.import_module(self.module).router
        if not isinstance(router, Router):
            raise TypeError(f"{self.module}.router is a {type(router).__name__}, not a powertools Router")
        if router._router_middlewares or router._exception_handlers:  # would change the routes included before it
            raise TypeError(f"{self.module}.router has middlewares or exception handlers: include it at once")
        return router


def _claims(prefix: str, method: str, segments: list[str]) -> bool:
    """Whether `prefix` ([METHOD ]/path) claims a request `method` to the path of `segments`."""
    wanted, _, path = prefix.rpartition(" ")
    if wanted and wanted != method:
        return False
    own = path.split("/")[1:]
    return len(segments) >= len(own) and all(
        mine in ("*", theirs) for mine, theirs in zip(own, segments[: len(own)], strict=True)
    )
