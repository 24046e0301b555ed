"""Who may do what: one door for pages, one for tokens (docs/projects.md).

Every page of project data lives under /p/<project>/ and goes through `member_required` or `lead_required`,
which resolve the project for the signed-in user: 404 for a project they are not a member of (as for one that
does not exist), 403 for a lead's page they may see but not use. Every API view goes through `token_required`,
which gives it the token and the token's project: an API answers for that project only.

API endpoints answer 401 without a valid token and 403 when the token lacks the scope.
"""

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from evalhub.models import ApiToken, Membership, Project, Role, hash_token


def projects_of(user) -> list[tuple[Project, str]]:
    """Every project `user` may open with their role in it (the instance admin leads every project), by slug. One
    query, which the door and the navigation's project switcher share."""
    if user.is_superuser:
        return [(project, Role.LEAD) for project in Project.objects.order_by("slug")]
    memberships = Membership.objects.filter(user=user).select_related("project").order_by("project__slug")
    return [(membership.project, membership.role) for membership in memberships]


def _project_door(view: Callable, *, lead: bool) -> Callable:
    @wraps(view)
    def wrapper(request: HttpRequest, project: str, *args, **kwargs) -> HttpResponse:
        mine = projects_of(request.user)
        # A project the user is not a member of is a 404, exactly as one that does not exist.
        found, role = next(((p, r) for p, r in mine if p.slug == project), (None, None))
        if found is None or role is None:
            raise Http404("No such project.")
        request.project, request.project_role = found, role
        request.my_projects = [p for p, _ in mine]  # the navigation's switcher: no query of its own
        if lead and role != Role.LEAD:
            raise PermissionDenied("Only the project's leads may do this.")
        return view(request, found, *args, **kwargs)

    wrapper.project_door = "lead" if lead else "member"  # type: ignore[attr-defined]  # read by the isolation tests
    return wrapper


def member_required(view: Callable) -> Callable:
    """A page of a project any of its members may open: the view gets the Project in place of its slug."""
    return _project_door(view, lead=False)


def lead_required(view: Callable) -> Callable:
    """A page of a project only its leads (and the instance admin) may use: reviewers of it get 403."""
    return _project_door(view, lead=True)


def admin_required(view: Callable) -> Callable:
    """A page of the instance admin's (projects, model prices): 403 for everyone else."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_superuser:
            raise PermissionDenied("Only the instance admin may do this.")
        return view(request, *args, **kwargs)

    return wrapper


def token_required(*scopes: str, one_of: tuple[str, ...] = ()) -> Callable:
    """An API view reachable only with a bearer token that carries every one of `scopes` and, when `one_of`
    names any, at least one of those (neither: any token).

    The view gets the token as `request.api_token` and its project as `request.project`: every query of the view
    starts from that project, so a slug or id of another project is 404. Sessions do not count: scripts hold tokens,
    people hold sessions, and neither reaches the other's endpoints.
    """

    def decorator(view: Callable) -> Callable:
        @login_not_required
        @csrf_exempt
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            header = request.headers.get("Authorization", "")
            kind, _, raw = header.partition(" ")
            if kind.lower() != "bearer" or not raw.strip():
                return _api_error(401, "Send an API token as 'Authorization: Bearer <token>'.")
            token = (
                ApiToken.objects.filter(token_hash=hash_token(raw.strip()), revoked_at__isnull=True)
                .select_related("project").first()
            )
            if token is None:
                return _api_error(401, "The API token is unknown or revoked.")
            missing = [scope for scope in scopes if scope not in token.scopes]
            if missing:
                named = " and ".join(f"'{scope}'" for scope in missing)
                return _api_error(403, f"This token lacks the scope{'s' if len(missing) > 1 else ''} {named}.")
            if one_of and not any(scope in token.scopes for scope in one_of):
                wanted = " or ".join(f"'{scope}'" for scope in one_of)
                return _api_error(403, f"This token lacks the scope {wanted}.")
            _note_use(token)
            request.api_token, request.project = token, token.project
            return view(request, *args, **kwargs)

        wrapper.token_scopes, wrapper.token_one_of = scopes, one_of  # type: ignore[attr-defined]  # the API reference
        return wrapper

    return decorator


LAST_USED_EVERY = timedelta(minutes=1)


def _note_use(token: ApiToken) -> None:
    """Keep the token's last_used_at to the minute: written at most once a minute a token, and never waited for.
    On SQLite every write takes the one write lock, which a busy receiver may hold for seconds: a token request
    then skips the note rather than wait (or fail) for it; on PostgreSQL a row another request is noting is
    skipped the same way."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_EVERY:
        return
    stale = (ApiToken.objects.filter(pk=token.pk)
             .filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY)))
    try:
        with _no_lock_wait(), transaction.atomic():
            if stale.select_for_update(skip_locked=True).values_list("pk", flat=True).first() is not None:
                stale.update(last_used_at=now)
    except OperationalError:  # SQLite's write lock is another's: noted on a later request
        return


@contextmanager
def _no_lock_wait() -> Iterator[None]:
    """On SQLite, fail at once ("database is locked") rather than wait for the write lock."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    timeout = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def _api_error(status: int, message: str) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="evalhub"'
    return response


def method_not_allowed(allowed: str) -> JsonResponse:
    """The API's JSON 405, naming the one method the endpoint takes."""
    response = JsonResponse({"error": f"Use {allowed}."}, status=405)
    response["Allow"] = allowed
    return response


def bounded_body(request: HttpRequest, limit: int) -> bytes | None:
    """An API request's body, or None when it is over `limit` bytes (declared or sent): read from the stream,
    since request.body stops at DATA_UPLOAD_MAX_MEMORY_SIZE, which is meant for forms."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


def gunzipped(body: bytes, limit: int) -> bytes | None:
    """A gzip body unpacked, or None when it unpacks to more than `limit` bytes; ValueError when it is not
    gzip. Unpacked a bounded step at a time, so a small body that unpacks to gigabytes costs nothing."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = unpacker.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(str(exc)) from None
    if len(out) > limit:
        return None
    if not unpacker.eof or unpacker.unused_data:
        raise ValueError("the gzip stream is cut short or followed by other bytes")
    return out
