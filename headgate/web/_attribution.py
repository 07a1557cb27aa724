"""Which operator surface a request's changes are recorded as (`headgate._actors`):
the console's, when it comes from a console page (its login session's cookie,
or the header the console's script sends), else the API's. A bearer token is
always the API's. Only a label on the definition events, never a permission:
the token and the write guard decide what a request may do."""

from __future__ import annotations

from typing import Final

from headgate import _actors as actors
from headgate.web._errors import ASGIApp, Receive, Scope, Send, request_header
from headgate.web._guard import bearer_credentials, cookie_session
from headgate.web._session import Sessions

CLIENT_HEADER: Final = b"x-headgate-client"
"""What console.js sends with its writes: "console"."""


class Attribution:
    def __init__(self, app: ASGIApp, sessions: Sessions | None) -> None:
        self.app = app
        self._sessions = sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with actors.acting_as(self._surface(scope)):
            await self.app(scope, receive, send)

    def _surface(self, scope: Scope) -> str:
        if bearer_credentials(scope) is not None:
            return actors.API
        if request_header(scope, CLIENT_HEADER) == "console":
            return actors.CONSOLE
        if self._sessions is not None and cookie_session(scope, self._sessions) is not None:
            return actors.CONSOLE
        return actors.API
