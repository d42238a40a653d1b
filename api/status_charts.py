"""Small inline SVG line charts for the status page (no script, no library).

Axes fit the data in view: a rate's runs from 0 to a readable ceiling of its
peak; a latency's is logarithmic, from a readable floor of its lowest value
to a ceiling of its highest, so a 1 ms median moves visibly beside a 200 ms
p99. Each series' newest value is in the legend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

WIDTH, HEIGHT, TOP = 360, 100, 14
"""Drawing box; TOP leaves room for the scale label."""
_STEPS = (1, 2, 5, 10)

Series = tuple[str, str, Sequence[float | None]]
"""(name, colour, values per second, oldest first; None: nothing that second)."""


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above `value` > 0 (a readable scale)."""
    scale = 10.0 ** math.floor(math.log10(value))
    return float(next(m * scale for m in _STEPS if m * scale >= value * (1 - 1e-9)))


def nice_floor(value: float) -> float:
    """The largest 1, 2 or 5 x 10^k at or below `value` > 0."""
    scale = 10.0 ** math.floor(math.log10(value))
    return float(next(m * scale for m in reversed(_STEPS[:-1]) if m * scale <= value * (1 + 1e-9)))


def _scale(values: list[float], log: bool) -> tuple[float, float, Callable[[float], float]]:
    """(bottom, top, value -> height fraction 0..1) for the values in view."""
    positive = [v for v in values if v > 0]
    if log and positive:
        low, high = nice_floor(min(positive)), nice_ceiling(max(positive))
        high = high if high > low else nice_ceiling(low * 1.01)
        span = math.log(high / low)
        return low, high, lambda v: math.log(max(v, low) / low) / span
    top = nice_ceiling(max(positive)) if positive else 1.0
    return 0.0, top, lambda v: v / top


def _path(values: Sequence[float | None], height: Callable[[float], float]) -> str:
    """M/L commands across the box; a gap (None) breaks the line."""
    dx, commands, pen_down = WIDTH / max(len(values) - 1, 1), [], False
    for i, v in enumerate(values):
        if v is None:
            pen_down = False
            continue
        y = HEIGHT - (HEIGHT - TOP) * min(max(height(v), 0.0), 1.0)
        commands.append(f"{'L' if pen_down else 'M'}{i * dx:.1f} {y:.1f}")
        pen_down = True
    return "".join(commands)


def line_chart(chart_id: str, title: str, unit: str, series: Sequence[Series], *, log: bool = False) -> str:
    """A figure with one line per series over the window, its scale at top and bottom."""
    bottom, top, height = _scale([v for _, _, values in series for v in values if v is not None], log)
    paths = "".join(
        f'<path class="line {name}" d="{_path(values, height)}" stroke="{colour}" fill="none" stroke-width="1.5"/>'
        for name, colour, values in series
    )
    legend = " ".join(f'<span class="key {name}">{name} <b>{_newest(values, unit)}</b></span>'
                      for name, _, values in series)
    scale = " (log)" if log else ""
    return (
        f'<figure id="{chart_id}"><figcaption>{title} {legend}</figcaption>'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}">'
        f'<line x1="0" y1="{TOP}" x2="{WIDTH}" y2="{TOP}" stroke="#ddd"/>'
        f'<line x1="0" y1="{HEIGHT - 0.5}" x2="{WIDTH}" y2="{HEIGHT - 0.5}" stroke="#999"/>'
        f'<text class="top" x="2" y="10" font-size="10" fill="#666">{top:g} {unit}{scale}</text>'
        f'<text class="bottom" x="2" y="{HEIGHT - 3}" font-size="10" fill="#666">{bottom:g}</text>{paths}</svg>'
        f'<div class="axis"><span>-60 s</span><span>now</span></div></figure>'
    )


def _newest(values: Sequence[float | None], unit: str) -> str:
    value = next((v for v in reversed(values) if v is not None), None)
    return "-" if value is None else f"{value:.3g} {unit}"
