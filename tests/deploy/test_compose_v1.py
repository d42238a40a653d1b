"""docker-compose.yml works with Debian's Compose v1 (`docker-compose`
1.29) as well as Compose v2: no top-level `name:` (v1 rejects it); the project
name comes from docs/deployment.md's `-p derender` instead."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def test_compose_file_has_no_top_level_name():
    assert "name" not in yaml.safe_load(COMPOSE.read_text()), "Compose v1 rejects a top-level `name:`"


@pytest.fixture(scope="module")
def compose_v1() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        if os.environ.get("DERENDER_REQUIRE_COMPOSE_V1") == "1":
            pytest.fail("DERENDER_REQUIRE_COMPOSE_V1=1 but docker-compose is not installed (apt-get install "
                        "docker-compose)")
        pytest.skip("docker-compose (v1) not installed (apt-get install docker-compose); "
                    "set DERENDER_REQUIRE_COMPOSE_V1=1 to require it")
    return path


@pytest.mark.parametrize("profile", [None, "monitoring"])
def test_compose_v1_accepts_the_file(compose_v1, profile):
    """`config` validates without a Docker engine, with docs/deployment.md's project name."""
    args = [compose_v1, "-p", "derender", "-f", str(COMPOSE)]
    if profile:
        args += ["--profile", profile]
    done = subprocess.run([*args, "config", "-q"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
