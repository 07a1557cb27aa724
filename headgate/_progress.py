"""A progress line for long commands: a bar on a terminal, sparse lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = max(total, 1)
        self.stream = stream if stream is not None else sys.stderr
        self._started = time.monotonic()
        self._last_line = 0.0
        self._is_terminal = self.stream.isatty()
        self._last_decile = -1

    def update(self, done: int) -> None:
        fraction = min(done / self.total, 1.0)
        elapsed = max(time.monotonic() - self._started, 1e-9)
        rate = done / elapsed
        text = f"{self.label}: {done:,}/{self.total:,} ({fraction:.0%}, {rate:,.0f}/s)"
        if self._is_terminal:
            if time.monotonic() - self._last_line < 0.1 and fraction < 1.0:
                return
            self._last_line = time.monotonic()
            filled = int(fraction * 30)
            self.stream.write(f"\r[{'#' * filled}{' ' * (30 - filled)}] {text}")
            self.stream.flush()
            return
        decile = int(fraction * 10)
        if decile > self._last_decile:
            self._last_decile = decile
            self.stream.write(text + "\n")

    def finish(self) -> None:
        if self._is_terminal:
            self.stream.write("\n")
        self.stream.flush()
