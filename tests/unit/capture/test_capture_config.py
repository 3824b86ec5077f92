"""ProfilerConfig from code, dicts and YAML; schedule_table and the `schedule` command. No torch needed."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner
from paths import REPO_ROOT

from analysis.capture import ProfilerConfig, schedule_action, schedule_table
from analysis.capture.schedule import recorded_steps_per_trace
from analysis.cli.schedule import command as schedule_command
from analysis.errors import ConfigError


def test_flat_fields_and_defaults():
    config = ProfilerConfig(wait=1, warmup=1, active=3, repeat=2, skip_first=10)
    assert (config.skip_first, config.wait, config.warmup, config.active, config.repeat) == (10, 1, 1, 3, 2)
    assert config.enabled and config.gzip
    assert config.activities is None  # CPU, plus CUDA when available
    assert not config.is_remote
    assert ProfilerConfig(log_dir="gs://bucket/run").is_remote
    assert not ProfilerConfig(log_dir="file:///tmp/run").is_remote


def test_from_dict_with_config_file_keys_and_string_values():
    config = ProfilerConfig.from_dict(
        {
            "should_enable_profiler": "True",
            "profiler_log_dir": "gs://bucket/job-7",
            "profiler_args": {
                "wait": "1",
                "warmup": "1",
                "active": "3",
                "repeat": "2",
                "skip_first": "10",
                "record_shapes": "0",
                "with_stack": "1",
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.CUDA"],
            },
        }
    )
    assert config.enabled is True
    assert config.log_dir == "gs://bucket/job-7"
    assert (config.skip_first, config.wait, config.warmup, config.active, config.repeat) == (10, 1, 1, 3, 2)
    assert config.record_shapes is False and config.with_stack is True
    assert config.activities == ("cpu", "cuda")


def test_schedule_nested_under_profiler_args():
    config = ProfilerConfig.from_dict({"profiler_args": {"schedule": {"wait": "2", "active": 1}}})
    assert (config.wait, config.active) == (2, 1)
    with pytest.raises(ConfigError, match=r"profiler_args\.schedule\.warmup"):
        ProfilerConfig.from_dict({"profiler_args": {"schedule": {"warmup": "x"}}})


def test_disabled_from_string_false():
    assert ProfilerConfig.from_dict({"should_enable_profiler": "False"}).enabled is False
    assert ProfilerConfig.from_dict({"enabled": 0}).enabled is False


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"should_enable_profiler": "maybe"}, "should_enable_profiler"),
        ({"profiler_args": {"wait": "one"}}, "profiler_args.wait"),
        ({"profiler_args": {"active": "0"}}, "profiler_args.active"),
        ({"warmup": -1}, "warmup"),
        ({"repeat": True}, "repeat"),
        ({"activities": ["cpu", "tpu"]}, "activities"),
        ({"profiler_log_dir": ""}, "profiler_log_dir"),
        ({"profiler_args": "wait=1"}, "profiler_args"),
        ({"profiler_args": {"wiat": 1}}, "profiler_args.wiat"),
        ({"enabled": True, "should_enable_profiler": False}, "should_enable_profiler"),
    ],
)
def test_invalid_values_name_the_key(values, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ProfilerConfig.from_dict(values)


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="active"):
        ProfilerConfig(active=0)
    assert ProfilerConfig(wait="2").wait == 2


def test_from_yaml_section(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text(
        "model: tiny\n"
        "profiling:\n"
        "  should_enable_profiler: 'True'\n"
        "  profiler_log_dir: /tmp/traces\n"
        "  profiler_args:\n"
        "    wait: '0'\n"
        "    warmup: 2\n"
        "    active: 1\n"
        "    profile_memory: 'true'\n"
    )
    config = ProfilerConfig.from_yaml(path, section="profiling")
    assert config == ProfilerConfig(log_dir="/tmp/traces", wait=0, warmup=2, active=1, profile_memory=True)
    with pytest.raises(ConfigError, match="train.yaml.*model"):
        ProfilerConfig.from_yaml(path)  # `model` is not a profiler key
    with pytest.raises(ConfigError, match="missing.yaml"):
        ProfilerConfig.from_yaml(tmp_path / "missing.yaml")


def test_schedule_table_example_from_the_issue():
    config = ProfilerConfig(wait=1, warmup=1, active=3, repeat=2, skip_first=10)
    table = schedule_table(config, steps=30)
    assert list(table.columns) == ["step", "action", "phase", "cycle", "trace_saved"]
    assert len(table) == 30
    phase = dict(zip(table["step"], table["phase"], strict=True))
    assert {phase[s] for s in range(10)} == {"skipped"}
    assert phase[10] == "waiting" and phase[11] == "warming up"
    assert [s for s in range(30) if phase[s] == "recording"] == [12, 13, 14, 17, 18, 19]
    assert {phase[s] for s in range(20, 30)} == {"done"}
    assert table.loc[table["trace_saved"], "step"].tolist() == [14, 19]
    assert table.loc[table["step"] == 17, "cycle"].item() == 1
    assert recorded_steps_per_trace(table) == [[12, 13, 14], [17, 18, 19]]


def test_schedule_table_partial_trace_at_exit():
    # repeat=0 cycles forever; a loop ending mid-recording gets one more trace when it stops
    config = ProfilerConfig(wait=0, warmup=1, active=3, repeat=0)
    table = schedule_table(config, steps=7)  # cycles: 0-3, 4-7 → step 7 never finishes
    assert table["step"].tolist() == list(range(8))
    last = table.iloc[-1]
    assert last["phase"] == "recording (partial, at exit)" and bool(last["trace_saved"])
    assert recorded_steps_per_trace(table) == [[1, 2, 3], [5, 6, 7]]


def test_skip_first_wait_drops_first_wait_only():
    config = ProfilerConfig(skip_first=2, wait=5, warmup=1, active=1, repeat=2, skip_first_wait=True)
    actions = [schedule_action(config, s) for s in range(12)]
    assert actions[:4] == ["NONE", "NONE", "WARMUP", "RECORD_AND_SAVE"]
    assert actions[4:9] == ["NONE"] * 5 and actions[9:11] == ["WARMUP", "RECORD_AND_SAVE"]


def test_schedule_table_rejects_bad_steps():
    with pytest.raises(ValueError, match="steps"):
        schedule_table(ProfilerConfig(), steps=-1)


def test_cli_schedule_prints_the_table():
    args = "--wait 1 --warmup 1 --active 3 --repeat 2 --skip-first 10 --steps 30".split()
    result = CliRunner().invoke(schedule_command, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["step", "action", "phase", "cycle", "trace_saved"]
    assert "RECORD_AND_SAVE" in lines[15] and lines[15].split()[0] == "14"
    assert "saved after step(s): [14, 19]" in result.output
    assert lines[1].split() == ["0", "NONE", "skipped", "–", "False"]  # not pandas' <NA>
    empty = CliRunner().invoke(schedule_command, ["--steps", "0"])
    assert empty.exit_code == 0 and "Empty DataFrame" not in empty.output
    assert "--steps 0 runs no training step" in empty.output


def test_cli_schedule_from_yaml(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("profiler_args: {wait: 0, warmup: 1, active: 2, repeat: 1}\n")
    result = CliRunner().invoke(schedule_command, ["--config", str(path), "--steps", "4"])
    assert result.exit_code == 0, result.output
    assert "saved after step(s): [2]" in result.output


def test_config_and_schedule_do_not_import_torch():
    # the whole point of keeping torch lazy: inspect a schedule on a machine without torch
    import subprocess

    code = (
        "import sys; from analysis.capture import ProfilerConfig, schedule_table;"
        "schedule_table(ProfilerConfig(), 5); import analysis.cli.schedule;"
        "sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=str(_repo())).returncode == 0


def _repo():

    return REPO_ROOT
