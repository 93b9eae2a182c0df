"""The authorizer function: the key rows and the settings, nothing else (a small cold start)."""

from __future__ import annotations

from dataclasses import dataclass

from engram.apikeys.oauth_clients import OAuthClients
from engram.apikeys.ports import ApiKeys
from engram.apikeys.repository import ApiKeyRepository
from engram.aws.table import Table
from engram.kernel.settings import Settings


@dataclass
class AuthorizerDeps:
    settings: Settings
    api_keys: ApiKeys
    oauth_clients: OAuthClients | None


def build(settings: Settings) -> AuthorizerDeps:
    table = Table(settings.table_name)
    return AuthorizerDeps(settings, ApiKeyRepository(table), OAuthClients(table) if settings.user_pool_id else None)
