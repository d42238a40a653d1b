"""``olmo3`` tool calls: vLLM 0.34's ``Olmo3PythonicToolParser.extract_tool_calls``.

Olmo 3 writes Python calls one a line, maybe inside ``<function_calls>``::

    <function_calls>get_weather(city="Paris")
    search(query=null)</function_calls>

vLLM takes the first ``<function_calls>...</function_calls>`` anywhere
(stripped) or else the whole output, joins its non-blank lines, stripped,
with ``", "`` into ``[...]`` and reads that as ``pythonic`` does
(``pythonic.pythonic_calls``: its regex and ``ast``; ``null``/``true``/
``false`` literals).  Calls make the content None; anything else leaves the
output as it came.  A block anywhere can decide, so nothing is sent before
the end (``held_tools.py`` holds the whole output).
"""

from __future__ import annotations

from .held_tools import Answer, Extractor, Tools, register
from .pythonic import pythonic_calls
from .spans import first_group

NAME = "olmo3"
# vLLM: re.search(r"<function_calls>(.*?)</function_calls>", text, re.DOTALL) (spans.py)
_BLOCK = "<function_calls>", "</function_calls>"


def olmo3_calls(text: str, tools: Tools = None) -> Answer:
    block = first_group(text, *_BLOCK)
    if block is not None:
        text = block.strip()
    listed = "[" + ", ".join(line.strip() for line in text.splitlines() if line.strip()) + "]"
    calls = pythonic_calls(listed)
    return None if calls is None else (None, calls)


register(NAME, Extractor(olmo3_calls))
