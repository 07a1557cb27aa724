"""Slows down guessing the API token: after LIMIT failures from one client within
WINDOW_MS, that client gets 429 (with Retry-After) until the oldest of them ages
out, whatever it offers, so a correct guess made while throttled is not confirmed.

A client is its address as the server saw it (behind a proxy, the proxy's, unless
uvicorn trusts the proxy's X-Forwarded-For: `--forwarded-allow-ips`), and an IPv6
address counts by its /64, which one host can fill as it likes. Memory is bounded:
at most MAX_CLIENTS are remembered, the least recently failing forgotten first,
so an attacker with many addresses cycles the table instead of growing it.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from collections import OrderedDict, deque
from typing import Final

from headgate._clock import Clock

LIMIT: Final = 10
WINDOW_MS: Final = 5 * 60 * 1000
MAX_CLIENTS: Final = 4096


def client_key(address: str | None) -> str:
    """The throttle's unit for `address`: the address, an IPv6 one by its /64."""
    if not address:
        return "unknown"
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, 64), strict=False))
    return str(parsed)


class FailureThrottle:
    def __init__(
        self,
        clock: Clock,
        limit: int = LIMIT,
        window_ms: int = WINDOW_MS,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._clock = clock
        self.limit = limit
        self.window_ms = window_ms
        self.max_clients = max_clients
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()
        self._lock = threading.Lock()  # callers run on the event loop and on worker threads

    def retry_after_s(self, client: str) -> int | None:
        """Seconds until `client` may try again, or None if it may now."""
        with self._lock:
            failures = self._recent(client)
            if failures is None or len(failures) < self.limit:
                return None
            wait_ms = failures[0] + self.window_ms - self._clock.now_ms()
            return max(1, math.ceil(wait_ms / 1000))

    def failed(self, client: str) -> bool:
        """Count a failure; True when it is the one that throttles the client."""
        with self._lock:
            failures = self._recent(client)
            if failures is None:
                failures = self._failures[client] = deque()
            failures.append(self._clock.now_ms())
            self._failures.move_to_end(client)
            while len(failures) > self.limit:
                failures.popleft()
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)
            return len(failures) == self.limit

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)

    def __len__(self) -> int:
        return len(self._failures)

    def _recent(self, client: str) -> deque[int] | None:
        failures = self._failures.get(client)
        if failures is None:
            return None
        horizon = self._clock.now_ms() - self.window_ms
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[client]
            return None
        return failures
