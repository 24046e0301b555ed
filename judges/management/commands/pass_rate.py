import json

from judges.calibration.estimates import ASSUMPTION
from judges.calibration.selectors import pct
from judges.estimates.selectors import run_pass_rate
from judges.management.run_command import RunFiguresCommand
from judges.models import Run


def _interval(ci: list[float] | None) -> str:
    return f"  (95 % CI {pct(ci[0])} – {pct(ci[1])})" if ci else ""


class Command(RunFiguresCommand):
    help = (
        "The agent's pass rate on a run's cases: the judge's verdicts corrected by the run's audit sample "
        "(docs/estimates.md); with --json the same JSON as GET /api/runs/<id>/pass-rate."
    )

    def handle(self, *args, run: int, as_json: bool, **options) -> None:
        target = self.run_or_error(run)
        figures = run_pass_rate(run=target)
        if as_json:
            self.stdout.write(json.dumps(figures, indent=2, allow_nan=False, ensure_ascii=False))
            return
        self.stdout.write("\n".join(summary_lines(target, figures)))


def summary_lines(run: Run, figures: dict) -> list[str]:
    lines = [
        f"Run {run.pk}: {run.config.rubric.slug} v{run.config.version} on {run.dataset.slug}, N = {figures['N']}",
        f"  judge's pass rate           {pct(figures['judge_pass_rate'])}",
    ]
    if figures["n_drawn"] == 0:
        return [*lines, "  No audit sample yet: draw one (audit_sample RUN_ID --size N) and label it."]
    if figures["estimate"] is None:
        lines.append(f"  too few labels: {figures['n_labeled']} labeled drawn cases, an estimate needs "
                     f"{figures['min_labels']} (docs/estimates.md)")
    human = figures["human_only"]
    lines += [
        f"  agent's pass rate           {pct(figures['estimate'])}{_interval(figures['ci95'])}",
        f"  humans only                 {pct(human['estimate'])}{_interval(human['ci95'])}",
        f"  sample                      {figures['method']}, {figures['n_labeled']} of {figures['n_drawn']} "
        "drawn cases labeled",
        f"  lambda                      {figures['lambda']:.3f}" if figures["lambda"] is not None else
        "  lambda                      —",
        "  effective labels            "
        + (f"{figures['effective_labels']:.0f}" if figures["effective_labels"] is not None else "—"),
    ]
    if figures["provisional"]:
        bounds = figures["provisional"]
        lines.append(f"  provisional: {figures['n_pending']} of {figures['n_drawn']} drawn cases still unlabeled; "
                     f"{pct(bounds['all_fail'])} if all fail, {pct(bounds['all_pass'])} if all pass")
    for category, row in figures["by_category"].items():
        shown = (f"{pct(row['estimate'])}{_interval(row['ci95'])}" if row["estimate"] is not None
                 else f"— (only {row['n_labeled']} labeled drawn cases)")
        lines.append(f"  {category or '(no category)':<27} {shown}")
    lines.append(f"  {ASSUMPTION}")
    return lines
