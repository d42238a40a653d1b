"""``start(.*?)end`` (DOTALL) between two literals, found in linear time.

vLLM's parsers search such patterns over the whole output.  Where an
``end`` never follows a ``start``, the regular expression retries at every
later ``start`` and scans to the end of the text from each (quadratic in an
output of many ``start``s); yet no later ``start`` can match once one has
no ``end`` after it.  ``str.find`` gives the same matches: the lazy group
stops at the first ``end``, and a search goes on after a match's end.
"""

from __future__ import annotations

from collections.abc import Iterator


def spans(text: str, start: str, end: str) -> Iterator[tuple[int, int]]:
    """``re.finditer(re.escape(start) + "(.*?)" + re.escape(end), text, re.DOTALL)``'s spans."""
    pos = 0
    while (at := text.find(start, pos)) >= 0 and (close := text.find(end, at + len(start))) >= 0:
        pos = close + len(end)
        yield at, pos


def first_span(text: str, start: str, end: str) -> tuple[int, int] | None:
    """The span of ``re.search``'s match (the first of ``spans``), or None."""
    return next(spans(text, start, end), None)


def first_group(text: str, start: str, end: str) -> str | None:
    """``re.search``'s group 1: the text between the first span's literals, or None."""
    span = first_span(text, start, end)
    return None if span is None else text[span[0] + len(start) : span[1] - len(end)]
