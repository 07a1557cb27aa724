"""The control API's request and response bodies (pydantic models; they also
make the OpenAPI schema), one module per noun, and what the command line's
`--json` prints.

Shared by `headgate.web` and `headgate.cli` so the command line never imports
the web package; both import it only where a body is needed (the command
line: with --json). It needs pydantic, which the server extra installs:
without it, `import headgate._wire` fails here, so the command line can check
before a command that prints a body acts.
"""

import pydantic  # noqa: F401 (the check above)
