"""The derender contract, shared by the API, workers and producers.

Bodies are vLLM's `/v1/chat/completions/derender` and
`/v1/completions/derender` shapes (0.33's and 0.34's are the same). Types are msgspec Structs: decoding a 5 MB
top-20 body into them is several times cheaper than pydantic models, and the
same types give the OpenAPI schemas. This package imports nothing heavy; each
name is imported from the module that defines it:

    types            token ids, raw pass-through JSON, the endpoint names
    requests         the generate stage's response and the request options
    responses        chat.completion and text_completion
    stream_requests  the `"stream": true` bodies and chunks
    step_requests    engine steps: many streams' chunks in one body
    model_name       the `model` a body names, read from its head (routing)
    error_shape      vLLM's error body
"""
