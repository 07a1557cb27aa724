"""What the `server` extra brings, and the one line that says to install it.

The library, the workers, the scheduler and the store's commands run on the core
install; the HTTP API, the console and `headgate serve` (and the command line's
`--json`, which prints the API's bodies) need FastAPI, pydantic, uvicorn, Jinja
and Swagger UI, which a Django or worker-only deployment never uses.
"""

from __future__ import annotations

from typing import Final

SERVER_MODULES: Final = frozenset(
    {
        "fastapi",
        "starlette",
        "pydantic",
        "pydantic_core",
        "uvicorn",
        "h11",
        "jinja2",
        "swagger_ui_bundle",
    }
)
INSTALL: Final = "pip install 'headgate-jobs[server]'"


class ServerExtraMissing(ModuleNotFoundError):
    """A module of the server extra is not installed. A ModuleNotFoundError, so a
    host that guards the import of `headgate.web` as it guards any other keeps
    working; its message says what to install."""

    def __init__(self, missing: str, needed_for: str) -> None:
        super().__init__(
            f"{needed_for} needs the server extra ({missing} is not installed): {INSTALL}",
            name=missing,
        )
        self.missing = missing
        self.needed_for = needed_for

    def __reduce__(self) -> tuple[type[ServerExtraMissing], tuple[str, str]]:
        return (type(self), (self.missing, self.needed_for))


def is_server_module(error: ModuleNotFoundError) -> bool:
    """Whether `error` is about a module the server extra installs."""
    return (error.name or "").partition(".")[0] in SERVER_MODULES
