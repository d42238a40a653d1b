"""The derender core: token ids + logprobs -> OpenAI responses, as vLLM 0.33.

    registry = ModelRegistry(read_models_config(path))   # loads tables once
    Derenderer(registry).derender("chat", body_bytes).body   # -> response bytes
"""

from .derenderer import Derenderer, Endpoint, Rendered
from .models import DEFAULT_MODEL, Model, ModelConfig, ModelRegistry, read_models_config

__all__ = [
    "DEFAULT_MODEL", "Derenderer", "Endpoint", "Model", "ModelConfig", "ModelRegistry", "Rendered",
    "read_models_config",
]
