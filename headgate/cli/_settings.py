"""The runtime settings a command takes as flags and from the environment:
`serve` runs with them, `schedules put` and `update` write under them."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Final

from headgate._domain.schedule_load import MAX_SCHEDULES_LIMIT, MAX_TICKS_PER_S_LIMIT
from headgate._errors import ValidationError
from headgate._runtime.config import MAX_MIN_INTERVAL_MS, RuntimeConfig
from headgate._worker_flags import int_in


@dataclass(frozen=True)
class RuntimeSetting:
    """A RuntimeConfig field that `serve` and the schedule writes take as a flag
    (`--max-schedules`) and from the environment (`HEADGATE_MAX_SCHEDULES`): its
    name, range and help are given here once, its default and rule by
    RuntimeConfig."""

    field: str
    highest: int
    help: str
    metavar: str = "N"

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")

    @property
    def environment(self) -> str:
        return "HEADGATE_" + self.field.upper()


RUNTIME_SETTINGS: Final = (
    RuntimeSetting(
        "min_interval_ms", MAX_MIN_INTERVAL_MS, "refuse specs that tick more often than this", "MS"
    ),
    RuntimeSetting(
        "max_schedules",
        MAX_SCHEDULES_LIMIT,
        "refuse writes that would leave the store more live schedules than this",
    ),
    RuntimeSetting(
        "max_ticks_per_s",
        MAX_TICKS_PER_S_LIMIT,
        "refuse writes that would make all schedules tick more often than this a second "
        "(each at its busiest hour)",
    ),
)


def add_runtime_settings(parser: argparse.ArgumentParser) -> None:
    """--min-interval-ms, --max-schedules, --max-ticks-per-s (`serve`, `schedules
    put` and `update`)."""
    for setting in RUNTIME_SETTINGS:
        default = getattr(RuntimeConfig, setting.field)
        parser.add_argument(
            setting.flag,
            type=int_in(1, setting.highest),
            metavar=setting.metavar,
            help=f"{setting.help} (default ${setting.environment}, else {default})",
        )


def runtime_flags_given(args: argparse.Namespace) -> list[str]:
    return [s.flag for s in RUNTIME_SETTINGS if getattr(args, s.field, None) is not None]


def runtime_config(args: argparse.Namespace) -> RuntimeConfig:
    """The settings a command's Headgate runs with: each flag, else its
    environment variable, else RuntimeConfig's default."""
    chosen: dict[str, int] = {}
    for setting in RUNTIME_SETTINGS:
        value: int | None = getattr(args, setting.field, None)
        text = os.environ.get(setting.environment)
        if value is None and text:
            if not (text.isascii() and text.isdigit() and 1 <= int(text) <= setting.highest):
                raise ValidationError(
                    setting.environment, f"must be a whole number from 1 to {setting.highest}"
                )
            value = int(text)
        if value is not None:
            chosen[setting.field] = value
    return RuntimeConfig(**chosen)  # type: ignore[arg-type]
