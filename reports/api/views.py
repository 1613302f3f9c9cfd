"""Reports over HTTP: usage per budget and period, the review report's figures. Its URL sits
under /api/ beside the budgets' (/api/usage/); what may be read comes from
reports.permissions, the figures from reports.review_report."""

from datetime import date

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api.base import RejectNulMixin
from fleet.api import CLUSTER, cluster_from
from reports import accounting, review_report
from reports.api import serializers as s
from reports.forms import PERIODS, PeriodForm
from reports.permissions import require_budget_rows

EARLIEST, LATEST = date(2000, 1, 1), date(2999, 12, 31)


class UsageView(RejectNulMixin, APIView):
    """Usage per budget node over a period: the review report's figures (reports.review_report)."""

    @extend_schema(
        summary="Usage per budget and period (the review report's figures)",
        parameters=[
            CLUSTER,
            OpenApiParameter("period", str, enum=["", *(value for value, _ in PERIODS)],
                             description="Default (also when empty): month."),
            OpenApiParameter("date", str, description="A day in the period (YYYY-MM-DD); "
                             "default today."),
            OpenApiParameter("start", str, description="First day of a custom period."),
            OpenApiParameter("end", str, description="Last day of a custom period."),
            OpenApiParameter("node", int, description="Only this budget's subtree."),
        ],
        responses=s.UsageSerializer,
    )
    def get(self, request):
        visible = require_budget_rows(request.user)
        cluster = cluster_from(request)
        params = {k: request.query_params[k] for k in ("period", "date", "start", "end")
                  if k in request.query_params}
        form = PeriodForm(params)
        if not form.is_valid():
            raise ValidationError({
                "period" if field == "__all__" else field: list(errors)
                for field, errors in form.errors.items()
            })
        for day in (form.cleaned_data.get(k) for k in ("date", "start", "end")):
            if day and not EARLIEST <= day <= LATEST:
                raise ValidationError({"period": [
                    f"Dates from {EARLIEST} to {LATEST} only."
                ]})
        start, end, period = form.bounds()
        tree = accounting.Tree()
        top = None
        if "node" in request.query_params:
            raw = request.query_params["node"]
            top = tree.by_pk.get(int(raw)) if raw.isdigit() else None
            if top is None or top.pk not in visible:
                raise ValidationError({"node": ["No such budget, or one you may not see."]})
        report = review_report.budget_report(cluster, start, end, tree=tree)
        definitions = dict(review_report.DEFINITIONS)
        rows = [
            {
                "id": row.node.pk,
                "path": row.node.path,
                "name": row.node.name,
                "depth": row.depth,
                "leaf": row.leaf,
                "shares": row.shares,
                "percent_of_cluster": 100 * row.fraction,
                "entitlement_gpu_hours": row.entitlement_h,
                "delivered_gpu_hours": row.delivered_h,
                "unallocated_gpu_hours": row.unallocated_h,
                "demand_gpu_hours": row.demand_h,
                "attainment": row.attainment,
                "wait_median_seconds": row.wait_median,
                "wait_p95_seconds": row.wait_p95,
                "starts": len(row.waits),
                "preemptions": row.preemptions,
                "lost_gpu_hours": row.lost_h,
                "utilization": row.utilization,
            }
            for row in report.rows
            if row.node.pk in visible and (
                top is None or row.node.path == top.path
                or row.node.path.startswith(top.path + "/")
            )
        ]
        body = {
            "cluster": cluster.name,
            "period": period,
            "start": report.start,
            "end": report.end,
            "until": report.until,
            "capacity_gpu_hours": report.capacity_h,
            "definitions": definitions,
            "rows": rows,
        }
        return Response(s.UsageSerializer(body).data)
