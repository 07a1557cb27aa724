"""The console's Jinja templates, and the context every page gets: the mount's
root path (`base`) and the login session, if any (for the CSRF token and the
Log out button)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from headgate.web._session import Session

TEMPLATES: Final = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
TEMPLATES.env.trim_blocks = TEMPLATES.env.lstrip_blocks = True
SESSION_STATE: Final = "headgate_session"
"""Where TokenAuth leaves the request's verified session in the ASGI scope's state."""


def request_session(request: Request) -> Session | None:
    session: Session | None = request.scope.get("state", {}).get(SESSION_STATE)
    return session


SECTIONS: Final = ("overview", "jobs", "workers", "queues", "limits", "quarantine")
"""The navigation's sections by their first path segment; any other page is the
schedules' (the list at / and each schedule's pages)."""


def section_of(path: str, base: str) -> str:
    """The navigation entry a page belongs to, marked as the current one."""
    first = path.removeprefix(base).strip("/").split("/", 1)[0]
    return first if first in SECTIONS else "schedules"


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    context["base"] = base = request.scope.get("root_path", "")
    context["section"] = section_of(request.url.path, base)
    context["login_session"] = request_session(request)
    return TEMPLATES.TemplateResponse(request, template, context, status_code=status)
