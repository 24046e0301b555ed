"""Sets up an embedded-default evalhub (SQLite, the filesystem broker) for a test that runs it in processes.

    python -m tests.evalhub.embedded_site setup CASES     # migrate; a lead, reviewers, a dataset, a rubric, a config
    python -m tests.evalhub.embedded_site run REPEATS     # start a contract-only run of the dataset; prints its id

Run with DATABASE_URL and CELERY_BROKER_URL unset and EVALHUB_DATA_DIR naming a fresh folder.
"""

import sys

import django

PASSWORD = "team-password"
REVIEWERS = [f"reviewer{i}" for i in range(5)]
PROJECT, DATASET, RUBRIC = "team", "team", "team-policy"
CONTRACT_SPEC = {"layers": ["contract"], "contract_checks": ["answer_present", "expected_tool"]}


def setup(cases: int) -> None:
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command

    from evalhub.models import Membership, Project, Role, User
    from judges.configs import services
    from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash

    call_command("migrate", verbosity=0)
    password = make_password(PASSWORD)
    project = Project.objects.create(slug=PROJECT, name="Team")
    lead = User.objects.create(username="lead", password=password)
    reviewers = User.objects.bulk_create(User(username=name, password=password) for name in REVIEWERS)
    Membership.objects.bulk_create([Membership(project=project, user=lead, role=Role.LEAD)] + [
        Membership(project=project, user=user, role=Role.REVIEWER) for user in reviewers])
    dataset = Dataset.objects.create(project=project, slug=DATASET, name="Team")
    dataset.reviewers.add(*reviewers)
    rubric = Rubric.objects.create(project=project, slug=RUBRIC, name="Does the answer follow the policy?",
                                   criteria="…", labels_per_case=2)
    Case.objects.bulk_create(
        Case(dataset=dataset, external_id=f"t{i:04}", input=f"Where is order {i}?", output=f"Order {i} ships.",
             expected_tool="lookup_order", split=case_split(f"t{i:04}"),
             content_hash=labeled_content_hash(input=f"Where is order {i}?", output=f"Order {i} ships.", trace={}))
        for i in range(cases)
    )
    services.judge_config_save(rubric=rubric, by=lead, spec=CONTRACT_SPEC)


def start_run(repeats: int) -> None:
    from evalhub.models import User
    from judges.runs import services
    from labeling.models import Dataset, Rubric

    config = Rubric.objects.get(project__slug=PROJECT, slug=RUBRIC).judge_configs.get()
    run = services.run_start(config=config, dataset=Dataset.objects.get(project__slug=PROJECT, slug=DATASET),
                             repeats=repeats,
                             concurrency=4, spend_cap_usd=None, by=User.objects.get(username="lead"))
    print(run.pk)


if __name__ == "__main__":
    django.setup()
    command, number = sys.argv[1], int(sys.argv[2])
    {"setup": setup, "run": start_run}[command](number)
