"""The control API and web console, as one ASGI app a host service can mount."""

from headgate.web._app import create_app

__all__ = ["create_app"]
