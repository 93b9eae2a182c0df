"""Where a tool call may go (TL5). In AWS: https only, to public addresses only, unless the owner
allows private ones (`AllowPrivateToolHosts`, for servers inside the VPC); the local stack may
also use http and loopback. Link-local addresses (169.254.0.0/16 holds the instance metadata
service, fe80::/10) and the metadata service's IPv6 address are refused in every mode.

The check runs on the address a connection is actually opened to: the guarded network backend
resolves the host itself, checks every address it got, and connects to the checked address (so a
DNS answer that changes between check and connect, DNS rebinding, cannot slip through); every
redirect opens its connections through the same backend, and its URL is checked again.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engram.kernel.errors import BadRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# The instance metadata service's IPv6 address on Nitro instances (its IPv4 one is link-local).
_METADATA_V6 = ipaddress.IPv6Address("fd00:ec2::254")
# NAT64 (64:ff9b::/96) embeds an IPv4 address: it is judged by that address.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class EgressRefused(BadRequest):
    code = "egress_refused"


@dataclass(frozen=True)
class EgressPolicy:
    allow_loopback: bool = False  # the local stack
    allow_http: bool = False  # the local stack
    allow_private: bool = False  # AllowPrivateToolHosts

    @classmethod
    def of(cls, tool_egress: str, allow_private: bool) -> EgressPolicy:
        local = tool_egress == "local"
        return cls(allow_loopback=local, allow_http=local, allow_private=allow_private or local)

    def check_url(self, url: str) -> None:
        """The scheme, and the host when it is a literal address (before any connection)."""
        parts = urlsplit(url)
        if parts.scheme != "https" and not (self.allow_http and parts.scheme == "http"):
            raise EgressRefused("tool servers are reached over https only", field="url")
        host = (parts.hostname or "").strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            if host.lower() == "localhost" or host.lower().endswith(".localhost"):
                address = ipaddress.IPv4Address("127.0.0.1")
            else:
                return  # a name: checked on each address it resolves to, when connecting
        self.check_address(address)

    def check_address(self, address: Address) -> None:
        reason = self.refusal(address)
        if reason:
            raise EgressRefused(f"the tool server's address {address} is {reason}; refused", field="url")

    def refusal(self, address: Address) -> str | None:
        if isinstance(address, ipaddress.IPv6Address):
            if address == _METADATA_V6:
                return "the instance metadata service"
            embedded = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
            if embedded is None and address in _NAT64:
                embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
            if embedded is not None:
                return self.refusal(embedded)
        if address.is_link_local:
            return "link-local (the instance metadata range)"
        if address.is_loopback:
            return None if self.allow_loopback else "loopback"
        if address.is_unspecified or address.is_multicast or address.is_reserved:
            return "not a unicast address"
        if not address.is_global:
            return None if self.allow_private else "private"
        return None


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    import anyio

    infos = await anyio.getaddrinfo(host, port, type=0)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def guarded_backend(policy: EgressPolicy, resolver: Resolver | None = None) -> Any:
    """An httpcore2 network backend that opens TCP connections only to addresses the policy allows."""
    import httpcore2

    resolve = resolver or system_resolver

    class GuardedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self) -> None:
            self._inner = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
        ) -> Any:
            try:
                literal: Address | None = ipaddress.ip_address(host.strip("[]"))
            except ValueError:
                literal = None
            addresses = [str(literal)] if literal is not None else await resolve(host, port)
            if not addresses:
                raise httpcore2.ConnectError(f"{host} has no address")
            for address in addresses:  # any refused answer refuses the host: a mixed answer is a trick
                policy.check_address(ipaddress.ip_address(address.split("%", 1)[0]))
            return await self._inner.connect_tcp(
                addresses[0], port, timeout=timeout, local_address=local_address, socket_options=socket_options
            )

        async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: object = None) -> Any:
            raise httpcore2.ConnectError("tool servers are reached over TCP only")

        async def sleep(self, seconds: float) -> None:
            await self._inner.sleep(seconds)

    return GuardedBackend()
