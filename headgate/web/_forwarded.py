"""Forwarded headers (`X-Forwarded-For`, `-Proto`, `-Host`), believed only from
the proxies the operator names: `create_app(forwarded_allow_ips=[...])`,
`headgate serve --forwarded-allow-ips`. By default, from nobody.

Any client can send those headers. Believed from anyone, `X-Forwarded-For` lets
each request claim a fresh address: the wrong-token throttle, which counts per
address, never throttles, and the log records the forged address. uvicorn
believes them from 127.0.0.1 by default, and whatever reaches the port from
this machine (a local proxy, a browser, a script) comes from 127.0.0.1. So this
middleware, outside every other, decides once for the whole app:

* from a trusted proxy (the connection's own address is one named), the client
  is the nearest address in `X-Forwarded-For` that is not itself a trusted proxy
  (each proxy appends the address it was reached from; what stands before that
  is whatever the client wrote), the scheme is `X-Forwarded-Proto`'s (`http` or
  `https`, the first of a list: the client-facing proxy's), and
  `X-Forwarded-Host` stays, for the app's own origin (`_guard.own_origin`). The
  proxy's address is kept in the scope's state (`forwarded_by`), for the log;
* from anyone else, the three headers are taken out of the request: nothing in
  the app can read them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

from headgate.web._errors import ASGIApp, Receive, Scope, Send, request_header

FORWARDED_HEADERS: Final = frozenset(
    {b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host"}
)
PEER_STATE: Final = "headgate_forwarded_by"
"""Where the scope's state keeps the trusted proxy a request came through."""
_SCHEMES: Final = frozenset({"http", "https"})

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """The addresses forwarded headers are believed from: networks, or any ('*')."""

    def __init__(self, networks: Iterable[Network], *, any_address: bool = False) -> None:
        self.networks = tuple(networks)
        self.any_address = any_address

    def __bool__(self) -> bool:
        return self.any_address or bool(self.networks)

    def __contains__(self, address: object) -> bool:
        if self.any_address:
            return True
        parsed = _address(address)
        if parsed is None:
            return False
        if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
            parsed = parsed.ipv4_mapped
        return any(parsed in network for network in self.networks)


def trusted_proxies_from(values: Iterable[str] | str | None) -> TrustedProxies:
    """`forwarded_allow_ips` read: IP addresses and networks (`10.0.0.0/8`), as a
    list or one comma-separated string, or `*` for any; None or empty: none.
    ValueError naming the entry that is neither."""
    if values is None:
        return TrustedProxies(())
    entries = values.split(",") if isinstance(values, str) else list(values)
    networks: list[Network] = []
    any_address = False
    for entry in (e.strip() for e in entries):
        if entry == "*":
            any_address = True
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(
                f"forwarded_allow_ips: {entry!r} is not an IP address or network "
                "(e.g. 10.0.0.5, 10.0.0.0/8, or '*' for any)"
            ) from None
    return TrustedProxies(networks, any_address=any_address)


def _address(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_address(value.strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def _without_port(entry: str) -> str:
    """`[2001:db8::1]:443` -> `2001:db8::1`, `192.0.2.1:80` -> `192.0.2.1`."""
    entry = entry.strip()
    if entry.startswith("["):
        return entry[1:].partition("]")[0]
    if entry.count(":") == 1:
        return entry.partition(":")[0]
    return entry


def _first(value: str | None) -> str | None:
    if value is None:
        return None
    first = value.split(",", 1)[0].strip()
    return first or None


class ForwardedHeaders:
    """The middleware (see the module)."""

    def __init__(self, app: ASGIApp, trusted: TrustedProxies) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            peer = scope.get("client")
            if peer is not None and self.trusted and peer[0] in self.trusted:
                self._believe(scope, str(peer[0]))
            else:
                scope["headers"] = [
                    (name, value)
                    for name, value in scope["headers"]
                    if name.lower() not in FORWARDED_HEADERS
                ]
        await self.app(scope, receive, send)

    def _believe(self, scope: Scope, peer: str) -> None:
        scope.setdefault("state", {})[PEER_STATE] = peer
        scheme = (_first(request_header(scope, b"x-forwarded-proto")) or "").lower()
        if scheme in _SCHEMES:
            scope["scheme"] = scheme if scope["type"] == "http" else scheme.replace("http", "ws")
        client = self._client(_forwarded_for(scope))
        if client is not None:
            scope["client"] = (client, 0)

    def _client(self, chain: list[str]) -> str | None:
        """The nearest address of `chain` that is no trusted proxy (if all are,
        the farthest); None when that is not an address."""
        addresses = [_without_port(entry) for entry in chain if entry.strip()]
        if not addresses:
            return None
        untrusted = [a for a in addresses if a not in self.trusted]
        chosen = untrusted[-1] if untrusted else addresses[0]
        parsed = _address(chosen)
        return None if parsed is None else str(parsed)


def _forwarded_for(scope: Scope) -> list[str]:
    """Every X-Forwarded-For entry, the headers joined in order."""
    chain: list[str] = []
    for name, value in scope["headers"]:
        if name.lower() == b"x-forwarded-for":
            chain.extend(bytes(value).decode("latin-1").split(","))
    return chain


def forwarded_by(scope: Scope) -> str | None:
    """The trusted proxy `scope`'s request came through, if any."""
    peer: str | None = scope.get("state", {}).get(PEER_STATE)
    return peer
