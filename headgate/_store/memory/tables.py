"""Rows by key with secondary indexes, and a transaction's changes over them.

A `Table` is committed state. A `TableChanges` is what one write transaction
has done to a table so far: it answers reads as the table would look if the
transaction committed now, and touches the table only in `commit`, so a
transaction that raises leaves nothing behind and readers never see half of
one. Both answer the same reads (`Rows`), so every query is written once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

Row = TypeVar("Row")
Row_co = TypeVar("Row_co", covariant=True)
Key = Hashable
IndexKey = Callable[[Row], Hashable | None]
"""What a row is indexed under, or None to leave it out of the index."""


class Rows(Protocol[Row_co]):
    """The reads every query uses."""

    def get(self, key: Key) -> Row_co | None: ...

    def keys_where(self, index: str, value: Hashable) -> set[Key]:
        """Keys of the rows indexed under `value` in `index`."""
        ...

    def items(self) -> Iterator[tuple[Key, Row_co]]: ...

    def __len__(self) -> int: ...


class Table(Generic[Row]):
    """Rows by key, each also found by its value in every index."""

    def __init__(self, indexes: Mapping[str, IndexKey[Row]] | None = None) -> None:
        self._rows: dict[Key, Row] = {}
        self._index_keys = dict(indexes or {})
        self._indexes: dict[str, defaultdict[Hashable, set[Key]]] = {
            name: defaultdict(set) for name in self._index_keys
        }

    @property
    def indexes(self) -> Mapping[str, IndexKey[Row]]:
        return self._index_keys

    def get(self, key: Key) -> Row | None:
        return self._rows.get(key)

    def keys_where(self, index: str, value: Hashable) -> set[Key]:
        found = self._indexes[index].get(value)
        return set(found) if found else set()

    def items(self) -> Iterator[tuple[Key, Row]]:
        return iter(self._rows.items())

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: Key) -> bool:
        return key in self._rows

    def put(self, key: Key, row: Row | None) -> None:
        """Set the key's row; None removes it."""
        before = self._rows.get(key)
        if before is not None:
            self._unindex(key, before)
        if row is None:
            self._rows.pop(key, None)
            return
        self._rows[key] = row
        for name, index_key in self._index_keys.items():
            value = index_key(row)
            if value is not None:
                self._indexes[name][value].add(key)

    def _unindex(self, key: Key, row: Row) -> None:
        for name, index_key in self._index_keys.items():
            value = index_key(row)
            if value is not None:
                keys = self._indexes[name][value]
                keys.discard(key)
                if not keys:
                    del self._indexes[name][value]


class TableChanges(Generic[Row]):
    """One transaction's changes to a table: reads see them over the committed
    rows; `commit` applies them."""

    def __init__(self, table: Table[Row]) -> None:
        self._table = table
        self._written: Table[Row] = Table(table.indexes)
        """Rows this transaction set, indexed like the table's."""
        self._removed: set[Key] = set()

    def get(self, key: Key) -> Row | None:
        if key in self._written:
            return self._written.get(key)
        if key in self._removed:
            return None
        return self._table.get(key)

    def keys_where(self, index: str, value: Hashable) -> set[Key]:
        committed = {
            key
            for key in self._table.keys_where(index, value)
            if key not in self._written and key not in self._removed
        }
        return committed | self._written.keys_where(index, value)

    def items(self) -> Iterator[tuple[Key, Row]]:
        for key, row in self._table.items():
            if key not in self._written and key not in self._removed:
                yield key, row
        yield from self._written.items()

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    def put(self, key: Key, row: Row | None) -> None:
        if row is None:
            self._written.put(key, None)
            self._removed.add(key)
        else:
            self._removed.discard(key)
            self._written.put(key, row)

    def commit(self) -> None:
        for key in self._removed:
            self._table.put(key, None)
        for key, row in self._written.items():
            self._table.put(key, row)
