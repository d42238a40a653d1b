"""Small inline SVG line charts for the status page (no script, no library)."""

from __future__ import annotations

import math
from collections.abc import Sequence

WIDTH, HEIGHT, TOP = 360, 90, 14
"""Drawing box; TOP leaves room for the scale label."""


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above `value` > 0 (a readable scale)."""
    scale = 10.0 ** math.floor(math.log10(value))
    return next(m * scale for m in (1, 2, 5, 10) if m * scale >= value)


def _path(values: Sequence[float | None], top: float) -> str:
    """M/L commands across the box; a gap (None: no requests) breaks the line."""
    dx, commands, pen_down = WIDTH / max(len(values) - 1, 1), [], False
    for i, v in enumerate(values):
        if v is None:
            pen_down = False
            continue
        y = HEIGHT - (HEIGHT - TOP) * min(v / top, 1.0)
        commands.append(f"{'L' if pen_down else 'M'}{i * dx:.1f} {y:.1f}")
        pen_down = True
    return "".join(commands)


def line_chart(chart_id: str, title: str, unit: str, series: Sequence[tuple[str, str, Sequence[float | None]]]) -> str:
    """`series`: (name, colour, values per second, oldest first)."""
    peak = max((v for _, _, values in series for v in values if v is not None), default=0.0)
    top = _nice_max(peak) if peak > 0 else 1.0
    paths = "".join(
        f'<path class="line {name}" d="{_path(values, top)}" stroke="{colour}" fill="none" stroke-width="1.5"/>'
        for name, colour, values in series
    )
    legend = " ".join(f'<span class="key {name}">{name}</span>' for name, _, _ in series)
    return (
        f'<figure id="{chart_id}"><figcaption>{title} {legend}</figcaption>'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}">'
        f'<line x1="0" y1="{TOP}" x2="{WIDTH}" y2="{TOP}" stroke="#ddd"/>'
        f'<line x1="0" y1="{HEIGHT - 0.5}" x2="{WIDTH}" y2="{HEIGHT - 0.5}" stroke="#999"/>'
        f'<text x="2" y="10" font-size="10" fill="#666">{top:g} {unit}</text>{paths}</svg>'
        f'<div class="axis"><span>-60 s</span><span>now</span></div></figure>'
    )
