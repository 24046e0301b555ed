"""The run report API, for scripts holding a `runs:read` token."""

from django.http import HttpRequest, JsonResponse

from evalhub.access import method_not_allowed, token_required
from evalhub.models import Scope
from judges.calibration.selectors import run_figures
from judges.estimates.selectors import run_pass_rate
from judges.runs.selectors import project_runs


@token_required(Scope.RUNS_READ)
def run_report(request: HttpRequest, run_id: int) -> JsonResponse:
    """GET /api/runs/<id>/report: the token's project's run's calibration figures and the agent's pass rate on it
    (`pass_rate`, docs/estimates.md), exactly as `calibration_report --json`."""
    if request.method != "GET":
        return method_not_allowed("GET")
    # The token's project's runs only: another project's run is unknown here, with the same words.
    run = project_runs(project=request.project).select_related("config__rubric").filter(pk=run_id).first()
    if run is None:
        return JsonResponse({"error": f"No run {run_id}."}, status=404)
    return JsonResponse({**run_figures(run=run), "pass_rate": run_pass_rate(run=run)},
                        json_dumps_params={"allow_nan": False})
