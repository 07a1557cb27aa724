"""What a projection is: a key function and a fold, both pure.

The store's projector loads the rows an event batch touches, folds each event
into its row with `apply`, and writes back what changed. A projection never
sees a database; that is what lets a rebuild and the live path share one fold.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from headgate._domain.events import RecordedEvent

Row = TypeVar("Row")


@dataclass(frozen=True)
class Projection(Generic[Row]):
    name: str
    table: str
    row_type: type[Row]
    key_column: str
    key: Callable[[RecordedEvent], Hashable | None]
    """Which row an event touches, or None if the projection ignores it."""
    apply: Callable[[Row | None, RecordedEvent], Row | None]
    """The row after the event; None deletes the row."""
    append_only: bool = False
    """Every event makes a new row, so no existing row needs loading."""
    creates: Callable[[RecordedEvent], dict[str, Any] | None] | None = None
    """For an event that always starts a new row (its key cannot exist yet): the
    row's columns.

    Lets the projector insert the row without loading or folding. Must agree
    with `apply`: `apply(None, e) == row_type(**creates(e))` whenever
    `creates(e)` is not None (a test checks this).
    """
    changes: Callable[[RecordedEvent], dict[str, Any] | None] | None = None
    """For an event that sets some columns whatever the row held: those columns.

    Lets the projector update a row without loading it. Must agree with
    `apply`: for any existing row, `apply(row, e) == replace(row, **changes(e))`
    whenever `changes(e)` is not None (a test checks this).
    """


AnyProjection = Projection[Any]


def fold_of(
    row_type: Callable[..., Row],
    creates: Callable[[RecordedEvent], dict[str, Any] | None],
    changes: Callable[[RecordedEvent], dict[str, Any] | None],
) -> Callable[[Row | None, RecordedEvent], Row | None]:
    """The `apply` of a projection whose every event either starts a row
    (`creates`) or sets some of its columns whatever it held (`changes`): the
    two shortcuts agree with it by construction."""

    def apply(row: Row | None, recorded: RecordedEvent) -> Row | None:
        created = creates(recorded)
        if created is not None:
            return row_type(**created)
        delta = changes(recorded)
        if delta is None or row is None:
            return row
        return row_type(**{**row.__dict__, **delta})

    return apply
