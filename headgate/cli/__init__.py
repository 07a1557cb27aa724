"""The `headgate` command line: `main` is the console script's entry point
(`headgate ...`, `python -m headgate`).

One module per noun (`_schedules`, `_jobs`, `_queues`, `_quarantine`, `_limits`,
`_handlers`, `_history`, `_store`, `_serve`, `_runners`, `_ticks`), the parser
and the error handling in `_main`, what they share in `_common`, `_options`,
`_output` and `_settings`. Every command reports bad arguments and unreachable
databases in one line on stderr with a non-zero exit status, never a
traceback (`_main` says which).
"""

from headgate.cli._main import main

__all__ = ["main"]
