"""A task's signature as its jobs' argument schema, and the call of it a job makes.

`@hg.task` functions take their arguments as a Python function does; their
job's payload is those arguments by parameter name (what `Signature.bind`
made of the call, defaults left out so that a default changed in code applies
to jobs already waiting), each value encoded by `_domain.arguments`:

    send.enqueue("ada@example.com", when=datetime(..., tzinfo=UTC))
    payload: {"to": "ada@example.com", "when": {"$type": "datetime", "v": "..."}}

A `*args` parameter is stored under its name as a list; `**kwargs` are stored
beside the named ones. A parameter annotated `JobContext` is no argument: the
attempt's context is given there when the job runs.

The call is checked when the job is enqueued (in the caller: a missing,
unknown or doubled argument, or a value the encoding refuses, is a
ValidationError naming it); the payload a job brings is decoded against the
annotations when it runs (a job enqueued by kind over HTTP, or one enqueued
before the signature changed, fails its attempt with that error, not retried:
`ArgumentsRefused`).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from headgate._domain.arguments import decode, encode
from headgate._errors import ValidationError
from headgate._json import JsonValue
from headgate._runtime.handlers import JobContext

_POSITIONAL: Final = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


class ArgumentsRefused(ValidationError):
    """A job's payload does not fit its task's signature: its attempt fails, and is
    not retried (the same payload would fail again)."""


@dataclass(frozen=True)
class TaskSignature:
    """One task function's parameters, as enqueue checks them and a job calls it."""

    name: str
    signature: inspect.Signature
    """Every parameter, the JobContext ones included."""
    arguments: inspect.Signature
    """The parameters a caller gives (those that are not the JobContext)."""
    contexts: tuple[str, ...]
    """The parameters the JobContext is given to."""
    hints: Mapping[str, Any]
    returns: Any

    @classmethod
    def of(cls, function: Callable[..., Any]) -> TaskSignature:
        name = getattr(function, "__name__", repr(function))
        signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function)
        except Exception:  # a name imported for type checking only: decoded by tags alone
            hints = {p.name: p.annotation for p in signature.parameters.values()}
        contexts = tuple(
            parameter.name
            for parameter in signature.parameters.values()
            if _is_context(hints.get(parameter.name, parameter.annotation))
        )
        arguments = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name not in contexts]
        )
        return cls(name, signature, arguments, contexts, hints, hints.get("return", Any))

    @property
    def described(self) -> str:
        """`send(to, when, *, cc=...)`: the arguments a caller gives, by name."""
        shown = []
        for parameter in self.arguments.parameters.values():
            prefix: dict[Any, str] = {
                inspect.Parameter.VAR_POSITIONAL: "*",
                inspect.Parameter.VAR_KEYWORD: "**",
            }
            text = prefix.get(parameter.kind, "") + parameter.name
            shown.append(text if parameter.default is inspect.Parameter.empty else text + "=...")
        return f"{self.name}({', '.join(shown)})"

    # at enqueue ---------------------------------------------------------------

    def payload(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, JsonValue]:
        """The call's arguments as a job's payload; ValidationError naming the
        argument when the call does not fit the signature or a value cannot be
        encoded."""
        try:
            bound = self.arguments.bind(*args, **kwargs)
        except TypeError as error:
            raise self._misfit(args, kwargs, error) from None
        payload: dict[str, JsonValue] = {}
        for name, value in bound.arguments.items():
            kind = self.arguments.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                for key, item in value.items():
                    payload[key] = encode(item, key)
            else:
                payload[name] = encode(value, name)
        return payload

    def _misfit(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any], error: TypeError
    ) -> ValidationError:
        """Which argument a failed bind is about, and the rule, in words."""
        parameters = self.arguments.parameters
        kinds = {p.kind for p in parameters.values()}
        for name in kwargs:
            if name in self.contexts:
                return ValidationError(name, "is the JobContext, given when the job runs")
            parameter = parameters.get(name)
            if parameter is None and inspect.Parameter.VAR_KEYWORD not in kinds:
                close = difflib.get_close_matches(name, list(parameters), n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                return ValidationError(name, f"is not an argument of {self.described}{hint}")
            if parameter is not None and parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                return ValidationError(name, f"is positional only in {self.described}")
        positional = [p for p in parameters.values() if p.kind in _POSITIONAL]
        if len(args) > len(positional) and inspect.Parameter.VAR_POSITIONAL not in kinds:
            return ValidationError(
                "args",
                f"{self.described} takes {len(positional)} positional arguments, got {len(args)}",
            )
        given = {p.name for p in positional[: len(args)]}
        for name in kwargs:
            if name in given:
                return ValidationError(name, "is given twice, by position and by keyword")
        for parameter in parameters.values():
            required = parameter.default is inspect.Parameter.empty and parameter.kind not in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            )
            if required and parameter.name not in given and parameter.name not in kwargs:
                return ValidationError(parameter.name, f"is required by {self.described}")
        return ValidationError("args", f"{error} ({self.described})")

    def check_payload(self, payload: JsonValue) -> None:
        """A payload given as JSON (`hg.enqueue(kind, {...})`, the HTTP API) fits the
        signature: an object of its arguments by name, each decodable."""
        self.call_with(payload, None)

    # when the job runs --------------------------------------------------------

    def call_with(
        self, payload: JsonValue, context: JobContext | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments the job's payload makes, the context
        given where the signature asks for it; ArgumentsRefused for a payload that
        does not fit."""
        if payload is None:
            payload = {}
        if not isinstance(payload, dict):
            raise ArgumentsRefused(
                "payload",
                f"must be an object of {self.described}'s arguments by name, "
                f"got {type(payload).__name__}",
            )
        parameters = self.arguments.parameters
        arguments: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        var_keyword = next(
            (p.name for p in parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD),
            None,
        )
        for name, value in payload.items():
            parameter = parameters.get(name)
            try:
                if parameter is None or parameter.kind is inspect.Parameter.VAR_KEYWORD:
                    if var_keyword is None:
                        raise ArgumentsRefused(name, f"is not an argument of {self.described}")
                    extra[name] = decode(value, self._hint(var_keyword), name)
                elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                    if not isinstance(value, list):
                        raise ArgumentsRefused(name, "must be a list (it is *" + name + ")")
                    hint = self._hint(name)
                    arguments[name] = tuple(
                        decode(item, hint, f"{name}[{i}]") for i, item in enumerate(value)
                    )
                else:
                    arguments[name] = decode(value, self._hint(name), name)
            except ArgumentsRefused:
                raise
            except ValidationError as error:
                raise ArgumentsRefused(error.field, error.rule) from None
        if var_keyword is not None and extra:
            arguments[var_keyword] = extra
        for parameter in parameters.values():
            required = parameter.default is inspect.Parameter.empty and parameter.kind not in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            )
            if required and parameter.name not in arguments:
                raise ArgumentsRefused(parameter.name, f"is required by {self.described}")
        for name in self.contexts:
            arguments[name] = context
        bound = inspect.BoundArguments(self.signature, arguments)  # type: ignore[arg-type,unused-ignore]
        return bound.args, bound.kwargs

    def _hint(self, name: str) -> Any:
        return self.hints.get(name, Any)


def _is_context(annotation: object) -> bool:
    if isinstance(annotation, str):
        return annotation.rsplit(".", 1)[-1] == "JobContext"
    return annotation is JobContext


class TaskCall:
    """What a worker runs for a task's job: the payload decoded, the function
    called, its result encoded. Pickled by reference to its task (a process
    executor's child imports the task's module and finds it there)."""

    def __init__(self, function: Callable[..., Any], signature: TaskSignature) -> None:
        self.function = function
        self.signature = signature

    def __call__(self, job: JobContext) -> JsonValue:
        args, kwargs = self.signature.call_with(job.payload, job)
        return encode_result(self.function(*args, **kwargs))

    def __reduce__(self) -> tuple[Any, ...]:
        return (imported_call, (self.function.__module__, self.function.__qualname__))


def imported_call(module: str, qualname: str) -> TaskCall:
    """The call of the task named `qualname` in `module` (in a child process)."""
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    call = getattr(found, "call", None)
    if isinstance(call, TaskCall):
        return call
    return TaskCall(found, TaskSignature.of(found))


async def run_async_task(call: TaskCall, job: JobContext) -> JsonValue:
    """An async task's job (`functools.partial` of this: a coroutine function, as
    the worker tells async handlers apart)."""
    args, kwargs = call.signature.call_with(job.payload, job)
    return encode_result(await call.function(*args, **kwargs))


def encode_result(value: object) -> JsonValue:
    try:
        return encode(value, "result")
    except ValidationError as error:
        raise ValidationError(error.field, error.rule + " (a task's result)") from None


def handler_of(call: TaskCall) -> Callable[[JobContext], Any]:
    """The handler a task registers: sync, or a coroutine function for an async one."""
    if inspect.iscoroutinefunction(call.function):
        return functools.partial(run_async_task, call)
    return call
