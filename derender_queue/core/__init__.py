"""The derender core: token ids + logprobs -> OpenAI responses, as the
model's vLLM release answers (derender_queue/compat.py).

    registry = ModelRegistry(read_models_config(path))   # loads tables once
    Derenderer(registry).derender("chat", body_bytes).body   # -> response bytes
"""

from derender_queue.contract.types import Endpoint
from derender_queue.models_config import DEFAULT_MODEL, ModelConfig, read_models_config

from .derenderer import Derenderer
from .models import Model, ModelRegistry
from .step import WHOLE_STEP, Rendered, join_shares

__all__ = [
    "DEFAULT_MODEL", "WHOLE_STEP", "Derenderer", "Endpoint", "Model", "ModelConfig", "ModelRegistry", "Rendered",
    "join_shares", "read_models_config",
]
