"""Property tests: whatever a py-spy raw file holds, reading and reporting it gives a table or one
of our errors (``InputFileError``); never a foreign exception or a hang. Shares add up to 100 %."""

from __future__ import annotations

import gzip

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import TEST_DATA
from timeouts import fails_after

from analysis.errors import InputFileError
from analysis.pyspy.samples import call_tree, parse_pyspy, pyspy_report, read_pyspy

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCE = "gs://bucket/prop/profile.txt"
SIMPLE = TEST_DATA / "pyspy" / "simple.txt"
HANG_S = 30  # seconds one example may take before it counts as a hang

digits = st.one_of(st.integers(0, 10**6).map(str), st.integers(0, 10**30).map(str),
                   st.sampled_from(["", "-1", "0x10", "1e3", "9" * 19, "9" * 40]))
names = st.one_of(st.sampled_from(["main", "<module>", "step", "forward", "a (b)", "x;y", ""]),
                  st.text(max_size=6))
frames = st.one_of(
    st.builds(lambda f, p, n: f"{f} ({p}:{n})", names,
              st.sampled_from(["train.py", "torch/nn/modules/module.py", "a b.py", ""]), digits),
    st.builds(lambda a: f"{a} (libc.so.6)", st.sampled_from(["0x7f00", "memcpy"])),
    st.builds(lambda p, c: f'process {p}:"{c}"', digits, st.text(max_size=5)),
    st.builds(lambda t, n: f"thread ({t})" + (f": {n}" if n else ""), digits, names),
    names,
)
lines = st.one_of(
    st.builds(lambda fs, n: ";".join(fs) + f" {n}", st.lists(frames, max_size=5), digits),
    st.text(max_size=20),
)
files = st.lists(lines, max_size=8).map("\n".join)


def _report(profiles) -> None:
    report = pyspy_report(profiles, library_name="torch")
    if len(report):
        assert abs(report["samples_pctg"].sum() - 100.0) < 1e-6 or report["samples"].sum() == 0
        assert (report["samples"] >= 0).all()
    tree = call_tree(profiles)
    assert (tree["self_samples"] >= 0).all()


def _check_text(text: str, on_error: str) -> None:
    with fails_after(HANG_S, "one example"):
        try:
            _report([parse_pyspy(text, source=SOURCE, on_error=on_error)])
        except InputFileError as exc:
            assert SOURCE in str(exc)


@SETTINGS
@given(files, st.sampled_from(["raise", "skip"]))
def test_generated_profiles_give_tables_or_our_errors(text, on_error):
    _check_text(text, on_error)


@SETTINGS
@given(st.text(max_size=200), st.sampled_from(["raise", "skip"]))
def test_random_text_gives_tables_or_our_errors(text, on_error):
    _check_text(text, on_error)


@SETTINGS
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_on_disk_give_tables_or_our_errors(tmp_path_factory, data, gzipped):
    path = tmp_path_factory.mktemp("pyspy") / "profile.txt"
    path.write_bytes(gzip.compress(data) if gzipped else data)
    with fails_after(HANG_S, "one example"):
        try:
            _report([read_pyspy(path, on_error="skip")])
        except InputFileError as exc:
            assert str(path) in str(exc)


@SETTINGS
@given(st.data())
def test_mutated_real_profiles_give_tables_or_our_errors(data):
    text = SIMPLE.read_text()
    where = data.draw(st.integers(0, len(text)))
    insert = data.draw(st.sampled_from(["\n", ";", " ", "9" * 25, ")", "(", ":", "\r", "\0", ""]))
    cut = data.draw(st.integers(0, 5))
    _check_text(text[:where] + insert + text[where + cut:], data.draw(st.sampled_from(["raise", "skip"])))

