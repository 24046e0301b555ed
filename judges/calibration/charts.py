"""Server-rendered SVG charts: the geometry in Python, the markup in templates.

The Content-Security-Policy forbids inline style attributes, so the templates use SVG presentation
attributes (x, y, width, fill…) for geometry and classes from static/css/app.css for colour. These
functions turn figures into coordinates and labels; only `rubric_versions_chart` reads the database
(through judges.calibration.selectors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from judges.calibration.selectors import pct, version_figures


def _threshold_pct(value: float) -> str:
    """A threshold as a percentage without needless decimals: 0.8 → "80 %", 0.825 → "82.5 %"."""
    return f"{value * 100:.1f}".removesuffix(".0") + " %"


# ---- the agreement band at the top of a run's report ---------------------------------------------


@dataclass
class Band:
    """Agreement on a horizontal band from `lo` to 100 %, with the floor and the ceiling marked."""

    width: int
    height: int
    title: str
    track: dict  # x, width of the whole axis
    zone: dict  # x, width of [floor, ceiling): where agreement must fall
    floor: dict  # x, label
    ceiling: dict  # x, label
    ticks: list[dict]  # x, label
    value: dict | None  # x, label, ci_x, ci_width, ok


BAND_WIDTH, BAND_HEIGHT, BAND_PAD = 640, 92, 28


def agreement_band(*, agreement: float | None, ci95: list[float] | None, floor: float, ceiling: float) -> Band:
    """The band's geometry. The axis starts at 50 % (or lower, when the figure or its interval does)
    so the region that matters, around the floor, is wide enough to read."""
    lowest = min(x for x in (0.5, floor - 0.1, agreement, *(ci95 or [])) if x is not None)
    lo = max(0.0, math.floor(lowest * 10) / 10)
    hi = 1.0
    usable = BAND_WIDTH - 2 * BAND_PAD

    def x(value: float) -> float:
        return round(BAND_PAD + (min(max(value, lo), hi) - lo) / (hi - lo) * usable, 1)

    ticks = [{"x": x(t / 10), "label": f"{t * 10} %"} for t in range(round(lo * 10), 11)]
    value = None
    if agreement is not None:
        ci_low, ci_high = ci95 or (agreement, agreement)
        value = {
            "x": x(agreement), "label": pct(agreement), "ci_x": x(ci_low),
            "ci_width": round(x(ci_high) - x(ci_low), 1), "ci_label": f"95 % CI {pct(ci_low)} – {pct(ci_high)}",
            "ok": floor <= agreement < ceiling,
        }
    title = (
        f"Agreement {pct(agreement)}" + (f" (95 % CI {pct(ci95[0])} – {pct(ci95[1])})" if ci95 else "")
        + f" against the floor {_threshold_pct(floor)} and the ceiling {_threshold_pct(ceiling)}"
        if agreement is not None else "No agreement yet: no evaluated judgment of a case with a human verdict"
    )
    return Band(
        width=BAND_WIDTH, height=BAND_HEIGHT, title=title,
        track={"x": x(lo), "width": round(x(hi) - x(lo), 1)},
        zone={"x": x(floor), "width": round(x(ceiling) - x(floor), 1)},
        floor={"x": x(floor), "label": f"floor {_threshold_pct(floor)}"},
        ceiling={"x": x(ceiling), "label": f"ceiling {_threshold_pct(ceiling)}"},
        ticks=ticks, value=value,
    )


# ---- agreement and rates across a rubric's config versions ---------------------------------------

CHART_WIDTH, CHART_HEIGHT = 760, 320
PLOT = {"left": 56, "right": 110, "top": 20, "bottom": 76}  # margins: floor/ceiling labels right, legend below
# (key, label, css class): what the versions chart draws, agreement first.
SERIES = (
    ("agreement", "agreement", "series-agreement"),
    ("true_pass_rate", "true pass rate", "series-tpr"),
    ("true_fail_rate", "true fail rate", "series-tfr"),
    ("flip_rate", "flip rate", "series-flip"),
)


@dataclass
class VersionsChart:
    width: int
    height: int
    title: str
    plot: dict  # x, y, width, height of the plotting area
    gridlines: list[dict]  # y, label
    floor: dict  # y, label
    ceiling: dict  # y, label
    columns: list[dict]  # x, label, run, has_run, note, figures
    series: list[dict]  # key, label, css, segments (list of "x,y x,y" strings), points [{x, y, label}]
    whiskers: list[dict]  # x, y1, y2, title: the agreement's 95 % interval per version
    legend: list[dict] = field(default_factory=list)  # x, y, label, css: one row under the plot

    @property
    def empty(self) -> bool:
        return not any(column["has_run"] for column in self.columns)


def versions_chart(*, versions: list[dict[str, Any]], floor: float, ceiling: float) -> VersionsChart:
    """versions: [{"version", "external", "run" (id or None), and the figures of that run or None}],
    oldest first. A version without a finished run is a gap in the lines, labelled "no run"."""
    left, top = PLOT["left"], PLOT["top"]
    width = CHART_WIDTH - PLOT["left"] - PLOT["right"]
    height = CHART_HEIGHT - PLOT["top"] - PLOT["bottom"]
    step = width / max(len(versions), 1)

    def y(value: float) -> float:
        return round(top + (1 - min(max(value, 0.0), 1.0)) * height, 1)

    columns = []
    for i, version in enumerate(versions):
        figures = version.get("figures")
        columns.append({
            "x": round(left + step * (i + 0.5), 1),
            "label": f"v{version['version']}" + (" ext" if version.get("external") else ""),
            "run": version.get("run"), "has_run": figures is not None and figures.get("agreement") is not None,
            "note": "" if figures is not None else "no run", "figures": figures or {},
            "probes": version.get("probes") or {},  # the run's bias probes, shown below the chart
        })

    series = []
    for key, label, css in SERIES:
        segments, current, points = [], [], []
        for column, version in zip(columns, versions, strict=True):
            value = (version.get("figures") or {}).get(key)
            if value is None:
                if current:
                    segments.append(current)
                current = []
                continue
            point = {"x": column["x"], "y": y(value), "label": pct(value)}
            current.append(point)
            points.append(point)
        if current:
            segments.append(current)
        series.append({
            "key": key, "label": label, "css": css, "points": points,
            "segments": [" ".join(f"{p['x']},{p['y']}" for p in segment) for segment in segments],
        })

    whiskers = []
    for column, version in zip(columns, versions, strict=True):
        ci = (version.get("figures") or {}).get("agreement_ci95")
        if ci:
            whiskers.append({
                "x": column["x"], "y1": y(ci[0]), "y2": y(ci[1]),
                "title": f"{column['label']}: 95 % CI {pct(ci[0])} – {pct(ci[1])}",
            })

    described = [
        f"{c['label']} {pct((v.get('figures') or {}).get('agreement'))}"
        for c, v in zip(columns, versions, strict=True) if c["has_run"]
    ]
    title = (
        f"Agreement per config version against the floor {_threshold_pct(floor)} and the ceiling "
        f"{_threshold_pct(ceiling)}: " + (", ".join(described) if described else "no version has a finished run")
    )
    legend_y = CHART_HEIGHT - 14
    return VersionsChart(
        width=CHART_WIDTH, height=CHART_HEIGHT, title=title,
        plot={"x": left, "y": top, "width": width, "height": height, "right": left + width, "bottom": top + height},
        gridlines=[{"y": y(t / 10), "label": f"{t * 10} %"} for t in range(0, 11, 2)],
        floor={"y": y(floor), "label": f"floor {_threshold_pct(floor)}"},
        ceiling={"y": y(ceiling), "label": f"ceiling {_threshold_pct(ceiling)}"},
        columns=columns, series=series, whiskers=whiskers,
        legend=[{"x": left + 150 * i, "y": legend_y, "label": label, "css": css}
                for i, (_, label, css) in enumerate(SERIES)],
    )


def rubric_versions_chart(*, rubric) -> VersionsChart:
    """The chart for a rubric's config page: each version's newest finished run, against its thresholds."""
    return versions_chart(
        versions=version_figures(rubric=rubric), floor=rubric.agreement_floor, ceiling=rubric.agreement_ceiling
    )


# ---- the threshold explorer: figures as pass_at moves --------------------------------------------

EXPLORER_WIDTH, EXPLORER_HEIGHT = 760, 418
EXPLORER_PLOT = {"left": 56, "right": 150, "top": 58, "height": 200}  # the top margin holds the marks' labels
EXPLORER_STRIP = {"gap": 34, "height": 56}  # the judge calls saved, as bars under the plot
EXPLORER_SERIES = SERIES[:3]  # agreement, true pass rate, true fail rate


@dataclass
class ThresholdChart:
    width: int
    height: int
    title: str
    plot: dict  # x, y, width, height, right, bottom
    strip: dict  # y, height, bottom, label_y
    gridlines: list[dict]  # y, label
    ticks: list[dict]  # x, label
    floor: dict  # y, label
    series: list[dict]  # key, label, css, segments, points [{x, y, label}]
    bars: list[dict]  # x, y, width, height, title
    marks: list[dict]  # x, label, css, label_y: the run's thresholds and the chosen pass_at, a row each
    legend: list[dict] = field(default_factory=list)


def _value(value: float) -> str:
    return f"{value:.2f}"


def threshold_chart(
    *, points: list[dict[str, Any]], floor: float, current: dict | None, chosen: dict
) -> ThresholdChart:
    """The explorer's chart: agreement, true pass and true fail rates over pass_at (points from
    judges.calibration.explorer.sweep, fail_below held), the floor, the run's own thresholds (`current`,
    None for an imported run) and the chosen pass_at marked, and under the plot, as bars, the share of
    the judgments with a similarity that each setting decides without calling the judge."""
    left, top, height = EXPLORER_PLOT["left"], EXPLORER_PLOT["top"], EXPLORER_PLOT["height"]
    width = EXPLORER_WIDTH - left - EXPLORER_PLOT["right"]
    lo, hi = points[0]["pass_at"], points[-1]["pass_at"]
    bottom = top + height
    strip_y = bottom + EXPLORER_STRIP["gap"]
    strip_bottom = strip_y + EXPLORER_STRIP["height"]

    def x(value: float) -> float:
        return round(left + (min(max(value, lo), hi) - lo) / ((hi - lo) or 1) * width, 1)

    def y(value: float) -> float:
        return round(top + (1 - min(max(value, 0.0), 1.0)) * height, 1)

    series = []
    for key, label, css in EXPLORER_SERIES:
        segments, current_segment, shown = [], [], []
        for point in points:
            value = point.get(key)
            if value is None:
                if current_segment:
                    segments.append(current_segment)
                current_segment = []
                continue
            current_segment.append(f"{x(point['pass_at'])},{y(value)}")
        if current_segment:
            segments.append(current_segment)
        for point in points:  # a dot every 0.05, labelled in its tooltip: the lines carry the rest
            if point.get(key) is not None and round(point["pass_at"] * 100) % 5 == 0:
                shown.append({"x": x(point["pass_at"]), "y": y(point[key]),
                              "label": f"pass_at {_value(point['pass_at'])}: {label} {pct(point[key])}"})
        series.append({"key": key, "label": label, "css": css, "points": shown,
                       "segments": [" ".join(segment) for segment in segments]})

    bar_width = max(1.0, round(width / len(points) - 1, 1))
    bars = []
    for point in points:
        total = point["with_similarity"]
        share = point["judge_calls_saved"] / total if total else 0.0
        bar_height = round(share * EXPLORER_STRIP["height"], 1)
        bars.append({
            "x": round(x(point["pass_at"]) - bar_width / 2, 1), "y": round(strip_bottom - bar_height, 1),
            "width": bar_width, "height": bar_height,
            "title": f"pass_at {_value(point['pass_at'])}: {point['judge_calls_saved']} of {total} judgments "
                     f"decided without the judge ({pct(share)})",
        })

    marks = []
    if current is not None:
        marks.append({"x": x(current["pass_at"]), "label": f"pass_at {_value(current['pass_at'])} (run)",
                      "css": "chart-threshold", "label_y": top - 36})
        if current.get("fail_below") is not None:
            marks.append({"x": x(current["fail_below"]), "label": f"fail_below {_value(current['fail_below'])} (run)",
                          "css": "chart-threshold", "label_y": top - 22})
    if current is None or chosen["pass_at"] != current["pass_at"]:
        marks.append({"x": x(chosen["pass_at"]), "label": f"pass_at {_value(chosen['pass_at'])} (chosen)",
                      "css": "chart-chosen", "label_y": top - 8})

    at = min(points, key=lambda p: abs(p["pass_at"] - chosen["pass_at"]))
    title = (
        f"Agreement, true pass rate and true fail rate as pass_at moves from {_value(lo)} to {_value(hi)}, "
        f"against the floor {_threshold_pct(floor)}; at pass_at {_value(at['pass_at'])}: agreement "
        f"{pct(at['agreement'])}, {at['judge_calls_saved']} of {at['with_similarity']} judgments decided "
        "without the judge"
    )
    tick_step = 0.1 if hi - lo > 0.3 else 0.05
    ticks = []
    t = math.ceil(lo / tick_step - 1e-9) * tick_step
    while t <= hi + 1e-9:
        ticks.append({"x": x(t), "label": _value(t)})
        t += tick_step
    legend_y = EXPLORER_HEIGHT - 12
    return ThresholdChart(
        width=EXPLORER_WIDTH, height=EXPLORER_HEIGHT, title=title,
        plot={"x": left, "y": top, "width": width, "height": height, "right": left + width, "bottom": bottom},
        strip={"y": strip_y, "height": EXPLORER_STRIP["height"], "bottom": strip_bottom,
               "label_y": strip_y + EXPLORER_STRIP["height"] / 2},
        gridlines=[{"y": y(g / 10), "label": f"{g * 10} %"} for g in range(0, 11, 2)],
        ticks=ticks, floor={"y": y(floor), "label": f"floor {_threshold_pct(floor)}"},
        series=series, bars=bars, marks=marks,
        legend=[{"x": left + 150 * i, "y": legend_y, "label": label, "css": css}
                for i, (_, label, css) in enumerate(EXPLORER_SERIES)],
    )


# ---- how the agent's pass-rate interval narrowed as labels came in (the run page) -----------------

NARROWING_PLOT = {"left": 56, "right": 130, "top": 16, "bottom": 44}
NARROWING_HEIGHT = 240


@dataclass
class NarrowingChart:
    width: int
    height: int
    title: str
    plot: dict  # x, y, right, bottom
    gridlines: list[dict]  # y, label
    ticks: list[dict]  # x, label: labeled drawn cases
    band: str  # the 95 % interval as one polygon's points
    line: str  # the estimate as a polyline's points
    judge: dict | None  # y, label: the judge's raw pass rate, for comparison


def narrowing_chart(*, history: list[dict[str, Any]], judge_pass_rate: float | None) -> NarrowingChart | None:
    """history: [{"labels", "estimate", "ci95"}] with labels increasing (judges.estimates.selectors);
    None with fewer than two points (nothing has narrowed yet)."""
    if len(history) < 2:
        return None
    left, top = NARROWING_PLOT["left"], NARROWING_PLOT["top"]
    width = CHART_WIDTH - left - NARROWING_PLOT["right"]
    height = NARROWING_HEIGHT - top - NARROWING_PLOT["bottom"]
    first, most = history[0]["labels"], history[-1]["labels"]

    def x(labels: int) -> float:
        return round(left + width * (labels - first) / (most - first), 1)

    def y(value: float) -> float:
        return round(top + (1 - min(max(value, 0.0), 1.0)) * height, 1)

    upper = [f"{x(p['labels'])},{y(p['ci95'][1])}" for p in history]
    lower = [f"{x(p['labels'])},{y(p['ci95'][0])}" for p in reversed(history)]
    last = history[-1]
    title = (f"The agent's pass rate as labels came in: {pct(last['estimate'])} (95 % CI {pct(last['ci95'][0])} – "
             f"{pct(last['ci95'][1])}) after {most} labeled drawn cases, from "
             f"{pct(history[0]['ci95'][0])} – {pct(history[0]['ci95'][1])} after {history[0]['labels']}")
    ticks = sorted({history[0]["labels"], history[len(history) // 2]["labels"], most})
    return NarrowingChart(
        width=CHART_WIDTH, height=NARROWING_HEIGHT, title=title,
        plot={"x": left, "y": top, "right": left + width, "bottom": top + height},
        gridlines=[{"y": y(t / 10), "label": f"{t * 10} %"} for t in range(0, 11, 2)],
        ticks=[{"x": x(t), "label": str(t)} for t in ticks],
        band=" ".join(upper + lower),
        line=" ".join(f"{x(p['labels'])},{y(p['estimate'])}" for p in history),
        judge=None if judge_pass_rate is None else {"y": y(judge_pass_rate),
                                                    "label": f"judge {pct(judge_pass_rate)}"},
    )
