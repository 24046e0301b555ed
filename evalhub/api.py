"""The API's own endpoint: what a token may do, so a script can refuse early rather than fail midway."""

from django.http import HttpRequest, JsonResponse

from evalhub.access import method_not_allowed, token_required


@token_required()
def token_info(request: HttpRequest) -> JsonResponse:
    """GET /api/token: the token's name, scopes and project (any valid token; never the token itself)."""
    if request.method != "GET":
        return method_not_allowed("GET")
    token = request.api_token
    return JsonResponse({"name": token.name, "prefix": token.prefix, "scopes": sorted(token.scopes),
                         "project": token.project.slug})
