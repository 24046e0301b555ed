"""The corrected pass rate over a monitor's windows as server-rendered SVG geometry (markup in the template: the
CSP forbids inline styles and scripts): the estimate as a line with its 95 % band, the judge's raw rate dashed."""

from __future__ import annotations

from judges.calibration.selectors import pct
from judges.monitoring.selectors import WindowRow

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 220, 44, 16, 12, 28


def _y(value: float, low: float, high: float) -> float:
    return round(TOP + (high - value) / (high - low) * (HEIGHT - TOP - BOTTOM), 1)


def rate_chart(rows: list[WindowRow]) -> dict:
    """Points per window (oldest left): the band (the interval's polygon), the corrected line, the raw line; the
    vertical range fits the figures, in steps of 10 points."""
    values = [v for row in rows for v in (row.figures.raw, *(row.figures.ci95 or ())) if v is not None]
    low = max(0.0, (int(min(values, default=0.0) * 10) / 10)) if values else 0.0
    high = min(1.0, (int(max(values, default=1.0) * 10) + 1) / 10) if values else 1.0
    if high - low < 0.2:
        low = max(0.0, high - 0.2)
    usable = WIDTH - LEFT - RIGHT
    step = usable / max(len(rows) - 1, 1)
    upper, lower, corrected, raw, points = [], [], [], [], []
    for i, row in enumerate(rows):
        x = round(LEFT + step * i, 1) if len(rows) > 1 else LEFT + usable / 2
        f = row.figures
        if f.ci95 is not None and f.estimate is not None:
            upper.append(f"{x},{_y(f.ci95[1], low, high)}")
            lower.append(f"{x},{_y(f.ci95[0], low, high)}")
            corrected.append(f"{x},{_y(f.estimate, low, high)}")
            points.append({"x": x, "y": _y(f.estimate, low, high), "provisional": row.provisional,
                           "title": (f"{row.window.start:%Y-%m-%d}: {pct(f.estimate)} "
                                     f"({pct(f.ci95[0])}–{pct(f.ci95[1])})")})
        if f.raw is not None:
            raw.append(f"{x},{_y(f.raw, low, high)}")
    grid = [round(low + (high - low) * k / 4, 3) for k in range(5)]
    return {
        "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "bottom": HEIGHT - BOTTOM,
        "band": " ".join(upper + lower[::-1]), "corrected": " ".join(corrected), "raw": " ".join(raw),
        "points": points, "grid": [{"y": _y(v, low, high), "label": f"{round(v * 100)} %"} for v in grid],
        "first": rows[0].window.start if rows else None, "last": rows[-1].window.start if rows else None,
    }
