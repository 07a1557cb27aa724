"""The control API and web console, as one ASGI app a host service can mount.

They need the server extra (`pip install 'headgate-jobs[server]'`): without it,
importing this package raises `ModuleNotFoundError` saying so in one line.
"""

import importlib

from headgate._server_extra import ServerExtraMissing, is_server_module

for _module in ("fastapi", "pydantic", "jinja2", "swagger_ui_bundle"):
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as error:
        if not is_server_module(error):
            raise
        raise ServerExtraMissing(
            error.name or _module, "headgate.web (the HTTP API and the console)"
        ) from None

from headgate.web._app import create_app  # noqa: E402 (after the check above)

__all__ = ["create_app"]
