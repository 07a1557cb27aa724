"""The query parameters' own types: what a URL may say for a number."""

from __future__ import annotations

import re
from typing import Annotated, Final

from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

_WHOLE_NUMBER: Final = re.compile(r"[+-]?[0-9]+")


def _whole_number_text(value: object) -> object:
    """A query's number as its digits alone: pydantic's lax int would also take
    `5.0`, which the API's schema (an integer) does not allow."""
    if isinstance(value, str) and not _WHOLE_NUMBER.fullmatch(value):
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


QueryInt = Annotated[int, BeforeValidator(_whole_number_text)]
"""An integer query parameter, written in digits (`?limit=20`, not `?limit=20.0`)."""
