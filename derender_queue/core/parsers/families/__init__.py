"""Engine parser families, one module each; importing this registers them all.

To add one, see docs/parsers.md ("Adding a family").
"""

from . import qwen3

__all__ = ["qwen3"]
