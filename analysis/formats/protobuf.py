"""A minimal protobuf wire-format reader: enough to walk an XPlane ``XSpace`` without a library.

``fields(buf)`` yields ``(field number, wire type, value)``: an int for varints (wire type 0) and
fixed-width numbers (1, 5: read as little-endian unsigned), a ``memoryview`` for length-delimited
values (2). Groups (3, 4) are obsolete and rejected. Every malformed input raises ``WireError``.
"""

from __future__ import annotations

from collections.abc import Iterator


class WireError(ValueError):
    """The bytes are not a valid protobuf message."""


def varint(buf, i: int) -> tuple[int, int]:
    """The varint at ``buf[i:]`` and the position after it."""
    value = shift = 0
    n = len(buf)
    while True:
        if i >= n:
            raise WireError("truncated varint")
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def fields(buf) -> Iterator[tuple[int, int, object]]:
    """Each field of one message, in order."""
    i, n = 0, len(buf)
    while i < n:
        key, i = varint(buf, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 2:
            length, i = varint(buf, i)
            if i + length > n:
                raise WireError(f"field {number}: {length} bytes announced, {n - i} left")
            value = buf[i : i + length]
            i += length
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if i + width > n:
                raise WireError(f"field {number}: truncated fixed-width value")
            value = int.from_bytes(buf[i : i + width], "little")
            i += width
        else:
            raise WireError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def signed64(value: int) -> int:
    """A varint read as int64 (protobuf writes negative int64 as 10-byte two's complement)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value
