"""The control API's request and response bodies (pydantic models; they also
make the OpenAPI schema), one module per noun, and what the command line's
`--json` prints.

Shared by `headgate.web` and `headgate.cli` so the command line never imports
the web package; both import it only where a body is needed (the command
line: with --json). It needs pydantic, which the server extra installs.
"""
