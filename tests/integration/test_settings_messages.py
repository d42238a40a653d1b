"""An invalid setting stops the process with a message naming the variable and
its bad value (docs/settings.md), not pydantic's "1 validation error for Settings"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _derender(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "derender.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("DERENDER_PORT", "abc", "integer"),
    ("DERENDER_LOG_LEVEL", "loud", "'debug', 'info', 'warning' or 'error'"),
    ("DERENDER_KEY_PREFIX", "a b", "pattern"),
    ("DERENDER_API_KEYS", "alice:short", "shorter than 16 characters"),
])
def test_an_invalid_setting_names_its_variable_and_value(variable, value, says):
    done = _derender("api", **{variable: value})
    assert done.returncode == 2
    assert f"{variable}={value!r}" in done.stderr, done.stderr
    assert says in done.stderr, done.stderr
    assert "validation error for Settings" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_load_settings_raises_one_line_per_bad_variable(monkeypatch):
    from derender_queue.settings import SettingsError, load_settings

    monkeypatch.setenv("DERENDER_PORT", "abc")
    monkeypatch.setenv("DERENDER_HEARTBEAT_S", "-1")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    lines = str(caught.value).splitlines()
    assert sorted(line.split(": ")[0] for line in lines) == ["DERENDER_HEARTBEAT_S='-1'", "DERENDER_PORT='abc'"]


def test_a_flag_is_named_as_the_flag_it_came_from():
    done = _derender("worker", "--processes", "0")
    assert done.returncode == 2 and "--processes=0" in done.stderr, done.stderr


@pytest.mark.parametrize(("url", "says"), [
    ("localhost:6379", "no scheme"),
    ("http://u:s3cret@h:1/0", "unknown scheme 'http://'"),
    ("redis://:s3cret@h:abc/0", "Port could not be cast"),
    ("redis+sentinel://u:s3cret@h1:26379", "a Sentinel URL's path is /MASTER"),
    ("redis+cluster://h1:7000/3", "only database 0"),
])
@pytest.mark.parametrize("command", ["api", "worker", "run", "batch"])
def test_a_redis_url_that_cannot_work_is_one_line_naming_the_variable_and_every_form(url, says, command, tmp_path):
    """Issue 32, item 3: redis-py's traceback named no variable and listed
    only redis://, rediss:// and unix://, though Sentinel and Cluster work."""
    args = [command] + ([str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl")] if command == "batch" else [])
    done = _derender(*args, DERENDER_REDIS_URL=url)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    line = done.stderr.strip()
    assert line.startswith("derender: invalid settings: DERENDER_REDIS_URL=") and says in line, line
    for form in ("redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://", "redis+cluster://",
                 "rediss+cluster://"):
        assert form in line, (form, line)
    assert "s3cret" not in line, line


@pytest.mark.parametrize("command", ["api", "worker", "run"])
def test_a_models_config_that_cannot_be_read_is_one_line(command, tmp_path):
    """Issue 32, item 4 (and the same for the services): a traceback before."""
    done = _derender(command, "--models-config", str(tmp_path / "missing.toml"))
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot read models config" in lines[0] and "missing.toml" in lines[0], lines
