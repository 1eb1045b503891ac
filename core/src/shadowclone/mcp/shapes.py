"""The tools' output schemas, made from the very attrs classes whose data they return.

A tool's result is what `--json` prints: the node's attrs objects through the shared cattrs
converter. Each class becomes a TypedDict with the same fields and types (nested classes,
enums, times, optional and repeated values), which the MCP SDK turns into the tool's
`outputSchema`, so a client knows every field, and the schema cannot drift from the data.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from datetime import datetime
from typing import Any, Union

import attrs
from typing_extensions import TypedDict  # pydantic reads only this one on Python 3.11

_PLAIN = (str, int, float, bool)


def shape(kind: Any) -> Any:
    """The JSON form of `kind` as a type pydantic can describe."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = tuple(shape(option) for option in typing.get_args(kind))
        return functools.reduce(lambda left, right: left | right, options)
    if origin in (tuple, list, frozenset, set):
        (item, *_) = typing.get_args(kind)
        return list[shape(item)]  # type: ignore[misc]
    if origin is dict:
        key, value = typing.get_args(kind)
        return dict[shape(key), shape(value)]  # type: ignore[misc]
    if kind is type(None) or kind in _PLAIN or kind is datetime:
        return kind
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind
    if isinstance(kind, type) and attrs.has(kind):
        return typed_dict(kind)
    raise TypeError(f"no JSON shape for {kind!r}")


@functools.cache
def typed_dict(cls: type) -> Any:
    """A TypedDict with `cls`'s fields, each of its JSON shape; every field is present, as the
    converter writes defaults too."""
    hints = typing.get_type_hints(cls)
    fields = {field.name: shape(hints[field.name]) for field in attrs.fields(cls)}
    made = TypedDict(cls.__name__, fields)  # type: ignore[misc]
    made.__doc__ = cls.__doc__
    return made


def listing_shape(clone: type) -> Any:
    """`list`'s result: the clones and the files that could not be read."""
    clones: Any = list[typed_dict(clone)]  # type: ignore[misc]
    return TypedDict("Listing", {"clones": clones, "problems": list[str]})  # type: ignore[operator]
