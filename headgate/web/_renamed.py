"""The API's former paths, answered as the paths they were renamed to.

`/api/v1/periodic/...` (the spec's paths) is `/api/v1/schedules/...`, a
schedule's `/run` its `/enqueue-now`, and `/api/v1/rate-limits/...`
`/api/v1/rates/...` (ARCHITECTURE.md, "Words"). A request to a former path is
rewritten before anything else sees it, so the Host check, the write guard,
the token and the route are those of the path now: one route each, and the
OpenAPI document names the paths now alone.
"""

from __future__ import annotations

import re
from typing import Final

from headgate.web._errors import ASGIApp, Receive, Scope, Send

RENAMED_PATHS: Final = (
    (re.compile(r"^/api/v1/periodic(?=[/:]|$)"), "/api/v1/schedules"),
    (re.compile(r"^(/api/v1/schedules/[^/]+)/run$"), r"\1/enqueue-now"),
    (re.compile(r"^/api/v1/rate-limits(?=/|$)"), "/api/v1/rates"),
)
"""(a former path's pattern, what it is now), applied in turn."""


def path_now(path: str) -> str:
    """`path` (within the app, its mount's prefix removed) as it is named now."""
    for former, now in RENAMED_PATHS:
        path = former.sub(now, path, count=1)
    return path


class RenamedPaths:
    """The outermost middleware: a former path becomes the path now."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            base = scope.get("root_path", "")
            path: str = scope["path"]
            within = path.removeprefix(base) if base else path
            now = path_now(within)
            if now != within:
                scope = {**scope, "path": base + now}
                raw = scope.get("raw_path")
                if isinstance(raw, bytes):
                    text = raw.decode("latin-1")
                    kept = len(base) if base and text.startswith(base) else 0
                    renamed = text[:kept] + path_now(text[kept:])
                    scope["raw_path"] = renamed.encode("latin-1")
        await self.app(scope, receive, send)
