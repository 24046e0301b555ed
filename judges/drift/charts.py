"""Agreement on new cases over time, as server-rendered SVG geometry (markup in the template: the CSP
forbids inline styles): one point per drift check with its Wilson interval, against the floor."""

from __future__ import annotations

from judges.calibration.selectors import pct
from judges.models import DriftCheck

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 180, 48, 56, 12, 28


def _y(value: float) -> float:
    return round(TOP + (1 - value) * (HEIGHT - TOP - BOTTOM), 1)


def drift_chart(checks: list[DriftCheck], *, floor: float) -> dict:
    """Points (agreement on new cases), whiskers (its 95 % interval) and the floor line; checks with no
    new case have no point. Oldest on the left."""
    usable = WIDTH - LEFT - RIGHT
    slot = usable / max(len(checks), 1)
    points, whiskers = [], []
    for i, check in enumerate(checks):
        if check.new_agreement is None:
            continue
        x = round(LEFT + slot * (i + 0.5), 1)
        title = (f"{check.checked_at:%Y-%m-%d %H:%M} · {check.new_n} new case{'' if check.new_n == 1 else 's'}: "
                 f"{pct(check.new_agreement)}")
        points.append({"x": x, "y": _y(check.new_agreement), "title": title})
        if check.new_ci95:
            low, high = check.new_ci95
            whiskers.append({"x": x, "y1": _y(high), "y2": _y(low),
                             "title": f"95 % interval {pct(low)} – {pct(high)}"})
    return {
        "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "bottom": HEIGHT - BOTTOM,
        "points": points, "whiskers": whiskers, "line": " ".join(f"{p['x']},{p['y']}" for p in points),
        "floor": {"y": _y(floor), "label": f"floor {pct(floor)}"},
        "grid": [{"y": _y(v), "label": f"{int(v * 100)} %"} for v in (0.0, 0.5, 1.0)],
        "first": checks[0] if checks else None, "last": checks[-1] if checks else None,
    }
