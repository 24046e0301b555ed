"""The run report API, for scripts holding a `runs:read` token."""

from django.http import HttpRequest, JsonResponse

from evalhub.access import method_not_allowed, token_required
from evalhub.models import Scope
from judges.calibration.selectors import run_figures
from judges.estimates.selectors import run_pass_rate
from judges.models import Run


@token_required(Scope.RUNS_READ)
def run_report(request: HttpRequest, run_id: int) -> JsonResponse:
    """GET /api/runs/<id>/report: the run's calibration figures and the agent's pass rate on it
    (`pass_rate`, docs/estimates.md), exactly as `calibration_report --json`."""
    if request.method != "GET":
        return method_not_allowed("GET")
    run = Run.objects.select_related("config__rubric").filter(pk=run_id).first()
    if run is None:
        return JsonResponse({"error": f"No run {run_id}."}, status=404)
    return JsonResponse({**run_figures(run=run), "pass_rate": run_pass_rate(run=run)},
                        json_dumps_params={"allow_nan": False})
