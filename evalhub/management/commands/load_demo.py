"""load_demo: both apps' demo data (evalhub/demo/), so it lives in the project (labeling never imports judges)."""

from django.core.management.base import BaseCommand

from evalhub.demo.judges import load_behavioral_demo, load_demo_prices, load_demo_run, load_semantic_demo_run
from evalhub.demo.labeling import DATASET_SLUG, DEMO_PASSWORD, load_demo


class Command(BaseCommand):
    help = "Load the store-support demo: users, a dataset of cases with traces, two rubrics and labels. Idempotent."

    def handle(self, *args, **options) -> None:
        created = load_demo()
        self.stdout.write(self.style.SUCCESS(
            f"Demo dataset '{DATASET_SLUG}': {created['cases']} cases, {created['labels']} labels and "
            f"{created['users']} users created (what existed is left as it was)."
        ))
        if created["users"]:
            self.stdout.write(f"Users lena (lead), rita, rob, ria (reviewers), ada (admin); password {DEMO_PASSWORD}")
        load_demo_prices()  # before the runs, so they count their (zero) cost
        # The judges' part: a contract-only config of tool-use and a finished run of it (no provider key needed).
        run = load_demo_run(dataset_slug=DATASET_SLUG)
        self.stdout.write(f"Demo judge run {run.pk} ({run.config.rubric.slug} v{run.config.version}, contract "
                          f"checks only): {run.done} of {run.total} judgments, {run.status}.")
        # A semantic config of return-policy, run through the scripted stand-in: the threshold explorer's demo.
        run = load_semantic_demo_run(dataset_slug=DATASET_SLUG)
        self.stdout.write(f"Demo semantic run {run.pk} ({run.config.rubric.slug} v{run.config.version}, embeddings "
                          f"and judge by the scripted stand-in, not models): {run.done} of {run.total} judgments, "
                          f"{run.status}.")
        # The behavioral story: a refused and a promoted version, probes, promotions, a gate, CI results.
        story = load_behavioral_demo(dataset_slug=DATASET_SLUG)
        lenient, strict = story["lenient"], story["strict"]
        self.stdout.write(
            f"Demo behavioral runs {lenient.pk} (return-policy v{lenient.config.version}, a lenient judge: refused as "
            f"evidence) and {strict.pk} (v{strict.config.version}: promoted to warn), judged by the scripted "
            f"stand-in, not a model; tool-use gated on run {load_demo_run(dataset_slug=DATASET_SLUG).pk}; "
            "grounded-answer at observe from day one, with no evidence yet"
            + (f"; {story['ci_results']} CI results posted by evalhub-gate." if story["ci_results"] else ".")
        )
        if story["ci_run"] is not None:
            ci_run = story["ci_run"]
            self.stdout.write(f"The loop: CI run {ci_run.pk} posted {ci_run.total} judged cases of ref {ci_run.ref} back "
                              f"into dataset {ci_run.dataset.slug}, now in its reviewers' queue.")
