"""Integers as the trace writes them (ints, integral floats, numeric strings) read as int64
values: used by the parser, the kernel_args table and the extras."""

from __future__ import annotations

I64_MAX = 2**63 - 1
I64_MIN = -(2**63)


def int_or_none(value) -> int | None:
    """An int, an integral float or a numeric string as an int64 value; anything else None.

    This is HTA's ``int(stream)`` (with -1 for failures applied by ``_as_int``), also used for ids.
    """
    if type(value) is int:
        return value if I64_MIN <= value <= I64_MAX else None
    if type(value) is float:
        return int(value) if value.is_integer() and I64_MIN <= value <= I64_MAX else None
    if type(value) is str:
        try:
            number = int(value)
        except ValueError:
            return None
        return number if I64_MIN <= number <= I64_MAX else None
    return None  # bool, null, lists, objects
