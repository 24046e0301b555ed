"""load_demo: both apps' demo data (evalhub/demo/), so it lives in the project (labeling never imports judges)."""

from django.core.management.base import BaseCommand

from evalhub.demo.code_review import DATASET_SLUG as CODE_DATASET
from evalhub.demo.code_review import load_code_review_judges, load_code_review_labels
from evalhub.demo.judges import load_behavioral_demo, load_demo_prices, load_demo_run, load_semantic_demo_run
from evalhub.demo.labeling import DATASET_SLUG, load_demo
from evalhub.demo.projects import CODE_PROJECT, DEMO_PASSWORD, LOGINS, STORE_PROJECT, demo_project


class Command(BaseCommand):
    help = (f"Load the demo's two projects: {STORE_PROJECT} (a store-support agent: cases with traces, rubrics, "
            f"labels, judges, promotions, CI results) and {CODE_PROJECT} (a coding agent, the same kinds of data, "
            "its own), with their users. Idempotent.")

    def handle(self, *args, **options) -> None:
        created = load_demo()
        store = demo_project(STORE_PROJECT)
        self.stdout.write(self.style.SUCCESS(
            f"Project {STORE_PROJECT}, dataset '{DATASET_SLUG}': {created['cases']} cases, {created['labels']} labels "
            f"and {created['users']} users created (what existed is left as it was)."
        ))
        load_demo_prices()  # before the runs, so they count their (zero) cost
        # The judges' part: a contract-only config of tool-use and a finished run of it (no provider key needed).
        run = load_demo_run(project=store)
        self.stdout.write(f"Demo judge run {run.pk} ({run.config.rubric.slug} v{run.config.version}, contract "
                          f"checks only): {run.done} of {run.total} judgments, {run.status}.")
        # A semantic config of return-policy, run through the scripted stand-in: the threshold explorer's demo.
        run = load_semantic_demo_run(project=store)
        self.stdout.write(f"Demo semantic run {run.pk} ({run.config.rubric.slug} v{run.config.version}, embeddings "
                          f"and judge by the scripted stand-in, not models): {run.done} of {run.total} judgments, "
                          f"{run.status}.")
        # The behavioral story: a refused and a promoted version, probes, promotions, a gate, CI results.
        story = load_behavioral_demo(project=store)
        lenient, strict = story["lenient"], story["strict"]
        self.stdout.write(
            f"Demo behavioral runs {lenient.pk} (return-policy v{lenient.config.version}, a lenient judge: refused as "
            f"evidence) and {strict.pk} (v{strict.config.version}: promoted to warn), judged by the scripted "
            f"stand-in, not a model; tool-use gated on run {load_demo_run(project=store).pk}; "
            "grounded-answer at observe from day one, with no evidence yet"
            + (f"; {story['ci_results']} CI results posted by evalhub-gate." if story["ci_results"] else ".")
        )
        if story["ci_run"] is not None:
            ci_run = story["ci_run"]
            self.stdout.write(f"The loop: CI run {ci_run.pk} posted {ci_run.total} judged cases of ref {ci_run.ref} "
                              f"back into dataset {ci_run.dataset.slug}, now in its reviewers' queue.")

        # The second project: a coding agent, its own data and people, sharing nothing with the first.
        code = load_code_review_labels()
        code_review = load_code_review_judges(project=demo_project(CODE_PROJECT))
        contract, behavioral = code_review["contract"], code_review["behavioral"]
        self.stdout.write(self.style.SUCCESS(
            f"Project {CODE_PROJECT}, dataset '{CODE_DATASET}': {code['cases']} cases and {code['labels']} labels "
            "created."
        ))
        self.stdout.write(
            f"Its runs {contract.pk} (safe-tools v{contract.config.version}, contract checks only: gated) and "
            f"{behavioral.pk} (fixes-test v{behavioral.config.version}, judged by the scripted stand-in, not a model: "
            f"promoted to warn); {code_review['ci_total']} CI results"
            + (f", {code_review['ci_results']} posted now by evalhub-gate." if code_review["ci_results"] else ".")
        )
        width = max(len(name) for name, _ in LOGINS)
        self.stdout.write("Log in as:")
        for name, what in LOGINS:
            self.stdout.write(f"  {name:<{width}}  {what}")
        self.stdout.write(f"Demo password for all: {DEMO_PASSWORD}")
