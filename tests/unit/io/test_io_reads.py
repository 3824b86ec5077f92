"""The neutral reader (analysis.io): read limits, the remote time budget, streamed gunzip,
bounded reads of any input file (traces, memory snapshots, py-spy profiles)."""

from __future__ import annotations

import gzip

import pytest

from analysis.errors import (
    ConfigError,
    CorruptInputError,
    CorruptTraceError,
    InputNotFoundError,
    InputTooLargeError,
    NotARegularFileError,
    TraceNotFoundError,
)
from analysis.io import (
    READ_LIMIT_ENV,
    REMOTE_TIMEOUT_ENV,
    gunzip_bounded,
    read_input_bytes,
    read_limit,
    remote_timeout,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("100", 100), ("2K", 2048), ("3M", 3 * 2**20), ("1G", 2**30), ("2GiB", 2 * 2**30),
     (" 4 gb ", 4 * 2**30)],
)
def test_read_limit_from_the_environment(monkeypatch, text, expected):
    monkeypatch.setenv(READ_LIMIT_ENV, text)
    assert read_limit() == expected


@pytest.mark.parametrize("bad", ["lots", "0", "-5", "1.5G", ""])
def test_bad_read_limit_is_a_config_error(monkeypatch, bad):
    monkeypatch.setenv(READ_LIMIT_ENV, bad)
    with pytest.raises(ConfigError, match=READ_LIMIT_ENV):
        read_limit()


def test_read_limit_argument_wins_and_is_checked(monkeypatch):
    monkeypatch.setenv(READ_LIMIT_ENV, "1K")
    assert read_limit(5000) == 5000
    with pytest.raises(ConfigError):
        read_limit(True)
    monkeypatch.delenv(READ_LIMIT_ENV)
    assert read_limit() > 0  # a share of the available memory


def test_gunzip_limit_boundary():
    text = b"x" * 1000
    data = gzip.compress(text)
    assert gunzip_bounded(data, "f", limit=1000) == text  # exactly at the limit
    with pytest.raises(InputTooLargeError, match="f: the decompressed gzip data is larger"):
        gunzip_bounded(data, "f", limit=999)


def test_gunzip_members_padding_and_damage():
    two = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert gunzip_bounded(two + b"\0" * 7, "f", limit=100) == b"abcd"
    with pytest.raises(CorruptInputError, match="unexpected bytes after the data"):
        gunzip_bounded(two + b"junk", "f", limit=100)
    with pytest.raises(CorruptInputError, match="truncated or corrupt"):
        gunzip_bounded(two[:-6], "f", limit=100)
    with pytest.raises(CorruptTraceError):
        gunzip_bounded(two[:-6], "f", limit=100, error=CorruptTraceError)
    assert gunzip_bounded(b"plain", "f", limit=1) == b"plain"  # not gzip: left as it is


def test_a_bomb_stops_at_the_limit_without_expanding():
    bomb = gzip.compress(b"\0" * (64 * 2**20), 9)  # 64 MiB in ~64 KiB
    with pytest.raises(InputTooLargeError):
        gunzip_bounded(bomb, "bomb.gz", limit=2**20)


def test_neutral_reads_raise_neutral_errors(tmp_path):
    """Snapshots and py-spy files read through analysis.io get the input-file classes, not the
    trace ones; a directory is refused without reading."""
    empty = tmp_path / "e"
    empty.write_bytes(b"")
    with pytest.raises(CorruptInputError, match="empty") as err:
        read_input_bytes(str(empty), trace=False)
    assert not isinstance(err.value, CorruptTraceError)
    with pytest.raises(InputNotFoundError) as missing:
        read_input_bytes(str(tmp_path / "absent"), trace=False)
    assert not isinstance(missing.value, TraceNotFoundError)
    with pytest.raises(NotARegularFileError, match="directory"):
        read_input_bytes(str(tmp_path))
    path = tmp_path / "p.bin"
    path.write_bytes(b"x" * 100)
    assert read_input_bytes(str(path), limit=100, trace=False) == b"x" * 100
    with pytest.raises(InputTooLargeError, match=r"p\.bin: the file \(100 bytes\) is larger"):
        read_input_bytes(str(path), limit=99, trace=False)


def test_remote_timeout_setting(monkeypatch):
    monkeypatch.setenv(REMOTE_TIMEOUT_ENV, "2.5")
    assert remote_timeout() == 2.5
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv(REMOTE_TIMEOUT_ENV, bad)
        with pytest.raises(ConfigError, match=REMOTE_TIMEOUT_ENV):
            remote_timeout()
