"""The Host check: a request is answered only for a host name the server is meant
to be reached by, which is what stops DNS rebinding.

A page on attacker.example can make its own name resolve to 127.0.0.1 after it
has loaded; the browser then treats this server as attacker.example, same
origin as the page, and lets it read and write freely. What gives it away is
the Host header, which still says attacker.example. So by default only the
loopback names are accepted (localhost, 127.0.0.1, [::1], on any port), plus
the names the operator gives (`allowed_hosts=`, $HEADGATE_ALLOWED_HOSTS,
`headgate serve --allowed-host`), or "*" for any, when something in front of
the app checks Host itself.

Only the Host header is checked, not X-Forwarded-Host: a rebinding page cannot
set the latter (a browser sends no such header), and a proxy that rewrites Host
to its upstream's address is what an operator configured.

The probes are exempt: a kubelet sends `Host: <pod ip>:<port>`, and they answer
only "the process is up" and "the store answers at revision N", nothing a
rebinding page could use.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Final

from headgate.web._errors import ASGIApp, Receive, Scope, Send, error, request_header
from headgate.web._probes import HEALTH_PATHS

LOOPBACK_HOSTS: Final = ("localhost", "127.0.0.1", "::1")
ANY_HOST: Final = "*"
ENVIRONMENT: Final = "HEADGATE_ALLOWED_HOSTS"
_SHOWN: Final = 100


def host_name(authority: str) -> str:
    """The host part of a Host header or an allowed name, lower case, without the
    port, the IPv6 brackets or a trailing dot: `[::1]:8080` -> `::1`."""
    text = authority.strip().lower()
    if text.startswith("["):
        inside, _, _ = text[1:].partition("]")
        return inside
    if text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


def named_hosts(names: Iterable[str] | None) -> list[str]:
    """The names given or, when none are, those of $HEADGATE_ALLOWED_HOSTS
    (comma-separated); blank entries left out."""
    if names is None:
        names = os.environ.get(ENVIRONMENT, "").split(",")
    elif isinstance(names, str):
        raise ValueError("allowed_hosts: a list of host names, e.g. ['jobs.internal']")
    return [name for name in names if name.strip()]


def allowed_hosts_from(names: Iterable[str] | None) -> frozenset[str]:
    """The accepted host names: loopback ones, and `named_hosts(names)`. Raises
    ValueError naming an entry that is not a host name."""
    accepted = set(LOOPBACK_HOSTS)
    for name in named_hosts(names):
        if name.strip() == ANY_HOST:
            accepted.add(ANY_HOST)
            continue
        host = host_name(name)
        if not host or any(c.isspace() or not c.isprintable() or c in "/?#@," for c in host):
            raise ValueError(f"allowed_hosts: {name!r} is not a host name")
        accepted.add(host)
    return frozenset(accepted)


def answered_names(names: Iterable[str]) -> list[str] | None:
    """The host names a server given `names` (valid ones) answers, in order,
    each once, as people write them (`[::1]`); None when it answers any."""
    hosts = [ANY_HOST if n.strip() == ANY_HOST else host_name(n) for n in named_hosts(names)]
    if ANY_HOST in hosts:
        return None
    return [f"[{h}]" if ":" in h else h for h in dict.fromkeys([*LOOPBACK_HOSTS, *hosts])]


class HostCheck:
    """400 for a request whose Host is not one of `allowed` (see the module)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or ANY_HOST in self.allowed:
            await self.app(scope, receive, send)
            return
        base: str = scope.get("root_path", "")
        path: str = scope["path"].removeprefix(base) if base else scope["path"]
        host = request_header(scope, b"host")
        if path in HEALTH_PATHS or (host is not None and host_name(host) in self.allowed):
            await self.app(scope, receive, send)
            return
        named = "no Host header" if host is None else f"Host {host[:_SHOWN]!r}"
        response = error(
            400,
            f"host: {named} is not a name this server answers to; name it in "
            f"allowed_hosts= (create_app), --allowed-host or ${ENVIRONMENT} (headgate serve)",
        )
        await response(scope, receive, send)
