"""The demo's projects and people: two agents judged apart, and who may open which (docs/projects.md).

    store-support  "Store support agent": lena leads it; rita, rob and ria review it
    code-review    "Code assistant": carl leads it; rita and rosa review it
    ada            the instance admin (a superuser): a member of nothing, she leads every project by being admin

rita reviews in both projects, so the demo shows one person's two queues kept apart. The people arrive as they
would on a real instance, through evalhub.members.services (each step audited): ada creates each project naming its
lead, the lead invites the reviewers, and they accept. Idempotent as the rest of the demo: a user keeps their
password, a member keeps the role a lead gave them since.
"""

from django.db import transaction

from evalhub.members.services import invitation_accept, invitation_create, project_create
from evalhub.models import Project, Role, User

DEMO_PASSWORD = "evalhub-demo"
STORE_PROJECT, CODE_PROJECT = "store-support", "code-review"
PROJECTS = {
    STORE_PROJECT: ("Store support agent", "Northwind Goods' customer-support agent: returns, shipping and order "
                                           "status through the lookup_order tool."),
    CODE_PROJECT: ("Code assistant", "Acme's coding agent: it fixes failing tests and small features in the "
                                     "shop-api repository with read_file, edit_file and run_tests."),
}
MEMBERS = {
    STORE_PROJECT: {"lena": Role.LEAD, "rita": Role.REVIEWER, "rob": Role.REVIEWER, "ria": Role.REVIEWER},
    CODE_PROJECT: {"carl": Role.LEAD, "rita": Role.REVIEWER, "rosa": Role.REVIEWER},
}
ADMIN = "ada"
# What load_demo prints, in this order.
LOGINS = (
    ("lena", f"lead of {STORE_PROJECT}"),
    ("carl", f"lead of {CODE_PROJECT}"),
    ("rita", "reviewer in both"),
    ("rob", f"reviewer in {STORE_PROJECT}"),
    ("ria", f"reviewer in {STORE_PROJECT}"),
    ("rosa", f"reviewer in {CODE_PROJECT}"),
    (ADMIN, "instance admin, a member of no project"),
)


def demo_project(slug: str) -> Project:
    """One of the demo's projects (load_people makes them)."""
    return Project.objects.get(slug=slug)


def _user(username: str, **extra) -> User:
    user, created = User.objects.get_or_create(username=username, defaults={"first_name": username.title(), **extra})
    if created:
        user.set_password(DEMO_PASSWORD)
        user.save(update_fields=["password"])
    return user


@transaction.atomic
def load_people() -> int:
    """The demo's users, its two projects and their memberships, where missing; returns how many users it made.

    A missing project is created by the admin with its lead; a missing member is invited (by the project's lead, or
    by the admin for the lead) and accepts. An existing membership keeps its role, whatever a lead changed it to.
    """
    before = User.objects.count()
    admin = _user(ADMIN, is_staff=True, is_superuser=True)
    for slug, members in MEMBERS.items():
        [lead] = [_user(name) for name, role in members.items() if role == Role.LEAD]
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            name, description = PROJECTS[slug]
            project = project_create(slug=slug, name=name, description=description, lead=lead, by=admin)
        have = set(project.memberships.values_list("user__username", flat=True))
        for username, role in members.items():  # the lead first: the others are invited by them
            if username in have:
                continue
            invitation, _ = invitation_create(project=project, invitee=username, role=role,
                                              by=admin if username == lead.username else lead)
            invitation_accept(invitation=invitation, user=_user(username))
    return User.objects.count() - before
