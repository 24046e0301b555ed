from django.core.management.base import BaseCommand, CommandError

from evalhub.celery import app
from judges.management.acting_user import acting_user
from judges.models import Proposal, Run
from judges.proposals import selectors, services
from judges.proposals.forms import ProposalForm


class Command(BaseCommand):
    help = (
        "Propose improvements of a finished run's judge (docs/improving.md): an editor reads the run's dev "
        "disagreements and proposes candidate versions, each judged on dev, the best on holdout. Runs here and "
        "prints the results table; --queue leaves the job to the workers and prints its id."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int, help="the run's id")
        parser.add_argument("--candidates", type=int, default=3, help="how many proposals to ask for (1-8)")
        parser.add_argument("--editor-model", default="", help="the editor's model (default: the judge's own)")
        parser.add_argument("--seed", type=int, default=0, help="which disagreements are shown when there are many")
        parser.add_argument("--max-cost-usd", default=None, help="the job's spend cap, editor and runs together")
        parser.add_argument("--by", help="the username recorded as the job's starter, a lead of the run's project "
                                         "(default: its first lead)")
        parser.add_argument("--queue", action="store_true", help="queue the job for the workers instead")

    def handle(self, *args, run: int, candidates: int, editor_model: str, seed: int, max_cost_usd: str | None,
               by: str | None, queue: bool, **options) -> None:
        target = Run.objects.select_related("config__rubric", "dataset").filter(pk=run).first()
        if target is None:
            raise CommandError(f"No run {run}.")
        # The page's form checks the values, so the command takes exactly what the page takes.
        form = ProposalForm({"candidates": candidates, "editor_model": editor_model, "seed": seed,
                             "max_cost_usd": max_cost_usd or ""})
        if not form.is_valid():
            raise CommandError("; ".join(f"--{name.replace('_', '-')}: {' '.join(errors)}"
                                         for name, errors in form.errors.items()))
        values = form.cleaned_data
        user = acting_user(by, project=target.dataset.project)
        if not queue:
            # The job and its runs work right here, as load_demo's runs do: no worker or broker needed.
            app.conf.task_always_eager = True
        try:
            started = services.proposal_start(run=target, by=user, candidates=values["candidates"],
                                              editor_model=values["editor_model"], seed=values["seed"],
                                              max_cost_usd=values["max_cost_usd"])
        except services.ProposalError as error:
            raise CommandError(str(error)) from None
        estimate = "unknown" if started.estimate_usd is None else f"${started.estimate_usd:.4f}"
        self.stderr.write(f"Proposal {started.pk} on run {run}: estimated at most {estimate}.")
        if queue:
            self.stdout.write(str(started.pk))
            return
        done = Proposal.objects.get(pk=started.pk)
        if done.status != Proposal.Status.FINISHED:
            raise CommandError(f"Proposal {done.pk} {done.get_status_display()}: {done.error}")
        for rejected in done.rejected:
            self.stderr.write(f"not applied: {rejected['name']}: {rejected['why']}")
        self.stdout.write(_table(done))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _table(proposal: Proposal) -> str:
    base = selectors.runs_figures([proposal.run])
    split = base.get("by_split") or {}
    lines = [
        f"base v{proposal.run.config.version}: dev {_pct((split.get('dev') or {}).get('agreement'))}, "
        f"holdout {_pct((split.get('holdout') or {}).get('agreement'))}",
        "candidate\tversion\tdev\tholdout\tgap\tceiling\trules\tcost\tname",
    ]
    for row in selectors.candidate_rows(proposal=proposal):
        rules = "—" if row.rules_pass is None else "pass" if row.rules_pass else "fail"
        flags = "AT CEILING" if row.at_ceiling else ""
        lines.append("\t".join([
            str(row.candidate.index) + (" *" if row.recommended else ""), f"v{row.candidate.config.version}",
            _pct(row.dev_agreement), _pct(row.holdout_agreement),
            "—" if row.overfit_gap is None else f"{row.overfit_gap * 100:+.1f} pts", flags, rules,
            "unknown" if row.cost_usd is None else f"${row.cost_usd:.4f}", row.candidate.name,
        ]))
        if row.candidate.criteria_note:
            lines.append(f"\tcriteria note (a suggestion, never applied): {row.candidate.criteria_note}")
    lines.append("* recommended: passes the promotion rules, below the ceiling, best on holdout")
    return "\n".join(lines)
