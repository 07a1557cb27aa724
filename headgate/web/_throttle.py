"""Slows down guessing the API token: after LIMIT failures from one client within
WINDOW_MS, that client gets 429 (with Retry-After) until the oldest of them ages
out, whatever it offers, so a correct guess made while throttled is not confirmed.

A client is its address as the server saw it: the connection's, or behind a
proxy the operator trusts (`_forwarded`), the one it forwards; an X-Forwarded-For
from anyone else is never read, so no request picks its own address. An IPv6
address counts by its /64, which one host can fill as it likes. Memory is
bounded: at most MAX_CLIENTS are remembered, the least recently failing
forgotten first, so an attacker with many addresses cycles the table instead of
growing it.

Failures are also counted in total: past TOTAL_LIMIT within WINDOW_MS, from
however many addresses, every client gets 429 until the oldest ages out, except
one that offered the right token within the window (the operator's own tools
keep working through an attack; each still under its own limit).
"""

from __future__ import annotations

import ipaddress
import math
import threading
from collections import OrderedDict, deque
from typing import Final, Literal

from headgate._clock import Clock

LIMIT: Final = 10
WINDOW_MS: Final = 5 * 60 * 1000
MAX_CLIENTS: Final = 4096
TOTAL_LIMIT: Final = 100
Throttled = Literal["client", "all"]


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
        total_limit: int = TOTAL_LIMIT,
    ) -> None:
        self._clock = clock
        self.limit = limit
        self.window_ms = window_ms
        self.max_clients = max_clients
        self.total_limit = total_limit
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()
        self._all: deque[int] = deque()
        """When the latest `total_limit` failures were, any client's."""
        self._succeeded: OrderedDict[str, int] = OrderedDict()
        """Clients that offered the right token, and when last."""
        self._lock = threading.Lock()  # callers run on the event loop and on worker threads

    def retry_after_s(self, client: str) -> int | None:
        """Seconds until `client` may try again, or None if it may now."""
        with self._lock:
            now = self._clock.now_ms()
            waits = []
            failures = self._recent(client)
            if failures is not None and len(failures) >= self.limit:
                waits.append(failures[0] + self.window_ms - now)
            if len(self._all_recent()) >= self.total_limit and not self._known(client):
                waits.append(self._all[0] + self.window_ms - now)
            if not waits:
                return None
            return max(1, math.ceil(max(waits) / 1000))

    def failed(self, client: str) -> Throttled | None:
        """Count a failure: "client" when it is the one that throttles the
        client, "all" when the one that throttles every client, else None."""
        with self._lock:
            now = self._clock.now_ms()
            failures = self._recent(client)
            if failures is None:
                failures = self._failures[client] = deque()
            failures.append(now)
            self._failures.move_to_end(client)
            while len(failures) > self.limit:
                failures.popleft()
            while len(self._failures) > self.max_clients:
                self._failures.popitem(last=False)
            everyone = self._all_recent()
            everyone.append(now)
            while len(everyone) > self.total_limit:
                everyone.popleft()
            if len(failures) == self.limit:
                return "client"
            return "all" if len(everyone) == self.total_limit else None

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)
            self._succeeded[client] = self._clock.now_ms()
            self._succeeded.move_to_end(client)
            while len(self._succeeded) > self.max_clients:
                self._succeeded.popitem(last=False)

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

    def _all_recent(self) -> deque[int]:
        horizon = self._clock.now_ms() - self.window_ms
        while self._all and self._all[0] <= horizon:
            self._all.popleft()
        return self._all

    def _known(self, client: str) -> bool:
        """Whether `client` offered the right token within the window."""
        at = self._succeeded.get(client)
        return at is not None and at > self._clock.now_ms() - self.window_ms
