"""Which profiler wrote a file, from its first bytes (never from its name).

- Nsight Systems SQLite: the SQLite header ``SQLite format 3\\0``;
- rocprofv3 JSON (plain or gzip): a JSON object whose first key is ``"rocprofiler-sdk-tool"``;
- XPlane (plain or gzip): a protobuf ``XSpace`` -- field 1 (``planes``, length-delimited) holding an ``XPlane``
  whose first field is its ``id`` (1, varint) or ``name`` (2, length-delimited);
- anything else is left to the Kineto parser (which names what is wrong with it).
"""

from __future__ import annotations

import re
import zlib

FORMATS = ("kineto", "nsys", "xplane", "rocprof")
SQLITE_MAGIC = b"SQLite format 3\x00"
_ROCPROF_KEY = re.compile(rb'^\s*\{\s*"rocprofiler-sdk-tool"')


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(data) and shift < 64:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
    return -1, i


def _looks_like_xspace(head: bytes) -> bool:
    """Field 1 (wire type 2) whose message starts with XPlane's id or name. The length is not
    checked against the file's size: a damaged XSpace (a length past the end) is still an
    XSpace, and its reader says what is wrong with it (JSON never starts with these bytes)."""
    if head[:1] != b"\x0a":  # field 1, wire type 2
        return False
    length, i = _varint(head, 1)
    if length <= 0:
        return False
    return head[i : i + 1] in (b"\x08", b"\x12")  # XPlane.id (varint) or XPlane.name


def detect(head: bytes) -> str:
    """``"nsys"``, ``"xplane"``, ``"rocprof"`` or ``"kineto"`` for a file starting with
    ``head`` (a few KiB are enough)."""
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    text = head
    if head.startswith(b"\x1f\x8b"):
        try:
            text = zlib.decompressobj(wbits=31).decompress(head, 4096)
        except zlib.error:
            return "kineto"
    if _ROCPROF_KEY.match(text.removeprefix(b"\xef\xbb\xbf")):
        return "rocprof"
    if _looks_like_xspace(text):  # xprof keeps profiles gzipped too (.xplane.pb.gz)
        return "xplane"
    return "kineto"
