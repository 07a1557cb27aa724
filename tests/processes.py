"""What tests of real processes ask of the operating system."""

from __future__ import annotations

from pathlib import Path


def process_running(pid: int) -> bool:
    """Whether `pid` runs (Linux's /proc): a zombie, dead and not yet reaped by
    whoever adopted it, does not."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"
