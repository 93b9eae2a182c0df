"""The authorizer function: the key rows and the settings, nothing else (a small cold start)."""

from __future__ import annotations

from dataclasses import dataclass

from engram.apikeys.ports import ApiKeys
from engram.apikeys.repository import ApiKeyRepository
from engram.aws.table import Table
from engram.kernel.settings import Settings


@dataclass
class AuthorizerDeps:
    settings: Settings
    api_keys: ApiKeys


def build(settings: Settings) -> AuthorizerDeps:
    return AuthorizerDeps(settings, ApiKeyRepository(Table(settings.table_name)))
