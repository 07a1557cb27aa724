"""Where and how `headgate serve` listens: its sockets, bound here, and its
limits on clients (`_http_server` serves on them; this module imports no web
stack, so the command line reads its defaults without starting one).

Binding the sockets before uvicorn starts makes a port in use (or a host that
names no address) an error of the command's own, in one line, before anything
runs; the "serving ... on" line is printed once the server is accepting on
them, never for a server that failed to start.

Bound to a wildcard (0.0.0.0, ::), the server is reached by any address of
this machine: `addresses_answered` names them, for the Host check, from the
standard library alone (on Linux, the interfaces' IPv4 addresses by ioctl and
their IPv6 ones from /proc; elsewhere, what the machine's name resolves to).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from headgate._errors import HeadgateError, ValidationError

__all__ = [
    "CannotListen",
    "ClientLimits",
    "address_of",
    "addresses_answered",
    "listening_sockets",
]

BACKLOG: Final = 2048
"""uvicorn's default: connections the kernel queues before they are accepted."""
MIN_CLIENT_TIMEOUT_S: Final = 0.1
MAX_CLIENT_TIMEOUT_S: Final = 3600.0
MAX_CONNECTIONS: Final = 65_535
_SIOCGIFADDR: Final = 0x8915
"""Linux's ioctl for an interface's (first) IPv4 address."""
_IPV6_INTERFACES: Final = Path("/proc/net/if_inet6")


class CannotListen(HeadgateError):
    """The address cannot be listened on (a port in use, a port below 1024)."""


@dataclass(frozen=True)
class ClientLimits:
    """How long a client may take to send a request, and how many may be connected
    (see `_http_server` for what each bounds, and why)."""

    header_timeout_s: float = 10.0
    """From the connection being ready for a request to its headers' end."""
    body_timeout_s: float = 30.0
    """From the end of the headers to the end of the body."""
    send_timeout_s: float = 30.0
    """How long, in all, a response may wait on a client that does not take it."""
    max_connections: int = 256
    """Past it, requests are answered 503 until connections close."""


def listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address `host` names (as uvicorn's own bind:
    `localhost` may be IPv4 and IPv6). ValidationError for a host that names no
    address; CannotListen when one cannot be bound (in use, not allowed)."""
    try:
        found = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ValidationError(
            "--host", f"{host!r} names no address to listen on ({reason})"
        ) from None
    addresses = list(dict.fromkeys((family, address) for family, *_, address in found))
    sockets: list[socket.socket] = []
    try:
        for family, address in addresses:
            # Port 0: every address on the port the first one was given.
            bound = (address[0], sockets[0].getsockname()[1], *address[2:]) if sockets else address
            sockets.append(_listen(family, bound, several=len(addresses) > 1))
    except OSError as error:
        for opened in sockets:
            opened.close()
        if error.errno == errno.EADDRNOTAVAIL:
            raise ValidationError(
                "--host", f"{host!r} is no address of this machine ({error.strerror})"
            ) from None
        raise CannotListen(
            f"--host/--port: cannot listen on {_authority(host, port)}: {error.strerror or error}"
        ) from None
    return sockets


def _listen(family: int, address: Any, *, several: bool) -> socket.socket:
    # IPPROTO_TCP named, as asyncio's own bind does: only then does asyncio turn
    # Nagle's algorithm off on each accepted connection, and without that every
    # keep-alive response waited some 40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and several:  # as asyncio: IPv4 has a socket of its own
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def address_of(host: str, sockets: list[socket.socket]) -> str:
    """`http://host:port/` of the first socket (its port, when 0 was asked for)."""
    return f"http://{_authority(host, sockets[0].getsockname()[1])}/"


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def addresses_answered(host: str, sockets: list[socket.socket]) -> list[str]:
    """The host names and addresses a client reaching `sockets` directly may
    address its requests to: `host` and the addresses it was bound to or, bound
    to a wildcard, this machine's name and every address of its interfaces in
    the families the sockets accept (IPv4 on an IPv6 socket too, unless it is
    IPv6-only)."""
    if not _is_wildcard(host):
        return list(dict.fromkeys([host, *(str(sock.getsockname()[0]) for sock in sockets)]))
    families = _families_accepted(sockets)
    name = socket.gethostname()
    found = [name, *_addresses_named(name, families)]
    if socket.AF_INET in families:
        found += _interface_ipv4_addresses()
    if socket.AF_INET6 in families:
        found += _interface_ipv6_addresses()
    return list(dict.fromkeys(found))


def _is_wildcard(host: str) -> bool:
    """Whether `host` binds every address (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _families_accepted(sockets: list[socket.socket]) -> set[int]:
    families = {int(sock.family) for sock in sockets}
    for sock in sockets:
        if sock.family == socket.AF_INET6 and not sock.getsockopt(
            socket.IPPROTO_IPV6, socket.IPV6_V6ONLY
        ):
            families.add(socket.AF_INET)
    return families


def _addresses_named(name: str, families: set[int]) -> list[str]:
    """What `name` resolves to (in a container, /etc/hosts maps it to the
    container's address), in `families`."""
    try:
        found = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    return [str(address[0]) for family, *_, address in found if family in families]


def _interface_ipv4_addresses() -> list[str]:
    """Each network interface's IPv4 address (Linux; elsewhere none)."""
    if not sys.platform.startswith("linux"):
        return []
    import fcntl  # noqa: PLC0415 (POSIX only)

    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, interface in socket.if_nameindex():
            request = struct.pack("256s", interface.encode()[:15])
            try:
                answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)
            except OSError:  # an interface with no IPv4 address
                continue
            found.append(socket.inet_ntoa(answer[20:24]))  # struct ifreq's sin_addr
    return found


def _interface_ipv6_addresses() -> list[str]:
    """Each network interface's IPv6 addresses (Linux: /proc/net/if_inet6, a line
    per address, first its 32 hex digits; elsewhere none)."""
    try:
        lines = _IPV6_INTERFACES.read_text().split("\n")
    except OSError:
        return []
    found = []
    for digits, *_ in (line.split() for line in lines if line.strip()):
        try:
            found.append(str(ipaddress.IPv6Address(bytes.fromhex(digits))))
        except ValueError:
            continue
    return found
