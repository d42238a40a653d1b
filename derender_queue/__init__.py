"""derender-queue: vLLM-compatible derender as a queue-backed service.

This package holds the layers below the worker and the API, and the commands
above them (README "Architecture"):

    contract/, errors, settings, models_config, logs, metrics   what everyone shares
    wire/       Redis: key names, job/result values, queue ops, waiter, client
    core/       token ids + logprobs -> response bytes (loads tokenizers)
    commands/   the `derender` CLI, `run`, `batch`: the only code importing worker/ and api/
"""
