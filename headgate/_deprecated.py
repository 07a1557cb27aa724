"""Old names that keep working for one minor version, each warning once per
call site (`DeprecationWarning`, shown by default in `__main__` and tests) with
what to call instead, then calling it.

A name is one line of a table (`headgate/_facade/old_names.py`):

    put_schedule = Deprecated(Schedules.put, via="schedules")

read as "Headgate.put_schedule is now hg.schedules.put": the descriptor looks
the replacement up on the Headgate at each call (`via`: the attribute, or a
function of the Headgate, that holds it), so the old name always does what the
new one does, and mypy sees the replacement's signature.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

P = ParamSpec("P")
T = TypeVar("T")


def warn_moved(old: str, instead: str, *, stacklevel: int = 3) -> None:
    """Warn that `Headgate.<old>` is deprecated in favour of `instead`."""
    warnings.warn(
        f"Headgate.{old} is deprecated and will be removed in the next minor version: "
        f"use {instead}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class Deprecated(Generic[P, T]):
    """An old method of Headgate: calls `function`'s namesake on `via(hg)`."""

    def __init__(
        self,
        function: Callable[Concatenate[Any, P], T],
        *,
        via: str | Callable[[Any], object],
        instead: str | None = None,
    ) -> None:
        self.function = function
        self.target = function.__name__
        self.via = via
        if instead is None:
            if not isinstance(via, str):
                raise TypeError("instead: say what replaces a name not on a namespace")
            instead = f"hg.{via}.{self.target}"
        self.instead = instead
        self.old = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def receiver(self, hg: object) -> object:
        """What holds the replacement on this Headgate."""
        return getattr(hg, self.via) if isinstance(self.via, str) else self.via(hg)

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type) -> Callable[P, T]: ...
    def __get__(self, instance: object | None, owner: type) -> Self | Callable[P, T]:
        if instance is None:
            return self

        @functools.wraps(self.function)
        def warned(*args: P.args, **kwargs: P.kwargs) -> T:
            warn_moved(self.old, self.instead)
            replacement: Callable[P, T] = getattr(self.receiver(instance), self.target)
            return replacement(*args, **kwargs)

        return warned


class DeprecatedStatic(Generic[P, T]):
    """An old static method of Headgate (callable on the class as on an instance)."""

    def __init__(self, function: Callable[P, T], *, instead: str) -> None:
        self.function = function
        self.instead = instead
        self.old = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def __get__(self, instance: object | None, owner: type) -> Callable[P, T]:
        @functools.wraps(self.function)
        def warned(*args: P.args, **kwargs: P.kwargs) -> T:
            warn_moved(self.old, self.instead)
            return self.function(*args, **kwargs)

        return warned


class DeprecatedProperty(Generic[T]):
    """An old property of Headgate: reads `name` of `via(hg)`."""

    def __init__(self, via: str, name: str) -> None:
        self.via = via
        self.target = name
        self.instead = f"hg.{via}.{name}"
        self.old = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def receiver(self, hg: object) -> object:
        return getattr(hg, self.via)

    @overload
    def __get__(self, instance: None, owner: type) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type) -> T: ...
    def __get__(self, instance: object | None, owner: type) -> Self | T:
        if instance is None:
            return self
        warn_moved(self.old, self.instead)
        value: T = getattr(self.receiver(instance), self.target)
        return value
