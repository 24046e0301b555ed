import json

from judges.calibration.rules import promotable
from judges.calibration.selectors import pct, run_figures, run_rules, shown_rules
from judges.estimates.selectors import run_pass_rate
from judges.management.run_command import RunFiguresCommand
from judges.models import Run


def _kappa(figures: dict) -> str:
    return f"{figures['kappa']:.3f}" if figures["kappa"] is not None else f"undefined ({figures['kappa_note']})"


class Command(RunFiguresCommand):
    help = (
        "A run's calibration figures against its rubric's current human verdicts: a readable summary, "
        "or with --json the same JSON as GET /api/runs/<id>/report (with the agent's pass rate on the run)."
    )

    def handle(self, *args, run: int, as_json: bool, **options) -> None:
        target = self.run_or_error(run)
        figures = run_figures(run=target)
        if as_json:
            self.stdout.write(_dumps({**figures, "pass_rate": run_pass_rate(run=target)}))
            return
        self.stdout.write(self._summary(target, figures))

    def _summary(self, run: Run, figures: dict) -> str:
        rules = run_rules(run=run, figures=figures)
        ci = figures["agreement_ci95"]
        reviewers = figures["reviewer_agreement"] or {}
        lines = [
            f"Run {run.pk}: {run.config.rubric.slug} v{run.config.version} on {run.dataset.slug}, K = {run.repeats}",
            f"  cases with a human verdict  {figures['n']}  ({figures['evaluated']} of {figures['judgments']} "
            "judgments evaluated)",
            f"  agreement                   {pct(figures['agreement'])}"
            + (f"  (95 % CI {pct(ci[0])} – {pct(ci[1])})" if ci else ""),
            f"  kappa                       {_kappa(figures)}",
            f"  false passes                {figures['false_pass']}  ({pct(figures['false_pass_rate'])})",
            f"  false fails                 {figures['false_fail']}  ({pct(figures['false_fail_rate'])})",
            f"  true pass / fail rate       {pct(figures['true_pass_rate'])} / {pct(figures['true_fail_rate'])}",
            f"  flips                       {figures['flips']}  (flip rate {pct(figures['flip_rate'])})",
            f"  coverage                    {pct(figures['coverage'])}",
            f"  contested                   {figures['contested']} of {figures['evaluated']} evaluated judgments "
            f"({pct(figures['contested_rate'])})",
            f"  reviewers agree             {pct(reviewers.get('percent'))}",
        ]
        for warning in figures["warnings"]:
            lines.append(f"  warning: {warning}")
        if figures["missing_kinds"]:
            lines.append(f"  warning: no case with a human verdict of kind {', '.join(figures['missing_kinds'])}")
        for reason in figures["stale_reasons"]:
            lines.append(f"  stale: {reason}")
        if promotable(rules):
            lines.append("Promotable: every rule is met.")
        else:
            lines.append("Not promotable:")
            lines += [
                f"  ✗ {rule.label}: {rule.value} (needs {rule.threshold})"
                for rule in shown_rules(run, rules) if not rule.met
            ]
        return "\n".join(lines)


def _dumps(figures: dict) -> str:
    # allow_nan=False: the figures never hold NaN; if one ever did, fail rather than print invalid JSON.
    return json.dumps(figures, indent=2, allow_nan=False, ensure_ascii=False)
