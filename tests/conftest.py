"""Shared fixtures: the real DeepSeek V4 tokenizer and a byte-fallback
Metaspace tokenizer built for the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from derender_queue.core.models import ModelRegistry
from derender_queue.models_config import BUILTIN, ModelConfig
from tests.helpers.leaks import ProcessWatch
from tests.helpers.tokenizer_fixtures import build_metaspace_byte_fallback

# A slow 2-core machine: no per-example deadline, modest example counts.
# The default profile is derandomized, so a run is reproducible: a landing
# never depends on which examples chance drew. `explore` draws new ones (and
# more of them); run it when changing decode code, and pin what it finds
# with @example.
_QUIET = [HealthCheck.too_slow]
settings.register_profile("ci", deadline=None, max_examples=200, derandomize=True, suppress_health_check=_QUIET)
settings.register_profile("explore", deadline=None, max_examples=2000, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("DERENDER_HYPOTHESIS_PROFILE", "ci"))

_process_watch = ProcessWatch()  # marks this session's environment before any test starts a process


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """Fail a test that leaves a process running (issue 12): its children,
    and anything started with this session's mark, orphans included."""
    before = _process_watch.snapshot()
    yield
    leftover = _process_watch.left_behind(before)
    if leftover:
        pytest.fail(f"processes left behind (killed now): {leftover}")


@pytest.fixture(scope="session")
def registry() -> ModelRegistry:
    return ModelRegistry(BUILTIN, preload=False)


@pytest.fixture(scope="session")
def deepseek(registry):
    return registry.get("deepseek-v4")


@pytest.fixture(scope="session")
def metaspace_dirs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("metaspace")
    return {kind: build_metaspace_byte_fallback(root / kind, kind) for kind in ("llama", "metaspace")}


@pytest.fixture(scope="session")
def metaspace_registry(metaspace_dirs) -> ModelRegistry:
    configs = tuple(
        ModelConfig(name=f"sp-{kind}", tokenizer=str(path)) for kind, path in metaspace_dirs.items()
    )
    return ModelRegistry(configs, preload=False)


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server on a free port (never a shared server's db 0)."""
    from tests.helpers.redis_process import RedisProcess

    try:
        server = RedisProcess().start()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    yield server
    server.close()


@pytest.fixture(scope="session")
def redis_cluster():
    """A local Redis Cluster shared by the session (tests/helpers/redis_cluster.py): 3
    masters with a replica each. For tests that leave its layout as they found
    it; one that kills or moves things takes `own_cluster`. A node timeout of
    5 s: a busy machine must not fail a master over by itself."""
    cluster = _start_cluster(node_timeout_ms=5000)
    yield cluster
    cluster.close()


@pytest.fixture
def own_cluster():
    """A local Redis Cluster of the test's own, to kill masters and move slots in;
    a node timeout of 2 s, so a killed master's replica takes over in ~5 s."""
    cluster = _start_cluster(node_timeout_ms=2000)
    yield cluster
    cluster.close()


def _start_cluster(**options):
    from tests.helpers.redis_cluster import LocalCluster

    try:
        return LocalCluster(**options).__enter__()  # stops what it started if it fails
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


PROCESS_FIXTURES = {"redis_server", "redis_cluster", "own_cluster"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on a real redis-server (or cluster) is in the slow tier
    (docs/development.md), marked or not; others that start processes mark themselves."""
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def prefix(request) -> str:
    """A key prefix of its own per test, so tests sharing a server never meet."""
    import secrets

    return f"t{secrets.token_hex(4)}"
