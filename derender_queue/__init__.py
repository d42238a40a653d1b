"""derender-queue: vLLM-compatible derender as a queue-backed service.

This package holds the layers below the worker and the API; the commands that
compose them live in the top-level `derender` package (README "Architecture"):

    contract/, errors, settings, models_config, logs, metrics   what everyone shares
    wire/       Redis: key names, job/result values, queue ops, waiter, client
    core/       token ids + logprobs -> response bytes (loads tokenizers)
"""
