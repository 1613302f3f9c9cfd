"""The scheduled review report. Every week (``settings.REVIEW_REPORT_DAY`` and
``REVIEW_REPORT_HOUR``, by the beat) each budget manager and reviewer who has not unsubscribed
receives the review report of the calendar week just ended for the subtrees they manage or
review, on every cluster where those have figures: one HTML mail with each cluster's table
and top users, the CSV of each cluster attached (the very table the page's CSV button
downloads), a link to each page, and an unsubscribe link to their preferences
(``ReportSubscription``).

Sending is claimed per user and week (``ReportDelivery``, unique): two beat workers, or a
retried task, never mail anyone twice.
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from fleet.models import Cluster
from reports import review_report, users
from reports.accounting import Tree
from reports.forms import midnight
from reports.models import ReportDelivery

log = logging.getLogger(__name__)


def last_week(now: datetime) -> tuple[datetime, datetime]:
    """The calendar week (Monday to Monday) before the one containing ``now``."""
    today = timezone.localdate(now)
    monday = today - timedelta(days=today.weekday())
    return midnight(monday - timedelta(days=7)), midnight(monday)


def recipients():
    """Active managers and reviewers of some budget with an e-mail address who have not
    unsubscribed."""
    return (
        get_user_model().objects
        .filter(Q(managed_budgets__isnull=False) | Q(reviewed_budgets__isnull=False),
                is_active=True)
        .exclude(email="").exclude(report_subscription__weekly_review=False)
        .distinct().order_by("pk")
    )


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def top_nodes(user, tree: Tree) -> list:
    """The nodes the user manages or reviews that are not below another such node."""
    held = ({node.path for node in user.managed_budgets.all()}
            | {node.path for node in user.reviewed_budgets.all()})
    return [node for node in tree.nodes if node.path in held
            and not any(_within(node.path, other) for other in held if other != node.path)]


@dataclass
class Section:
    cluster: Cluster
    columns: list[str]
    lines: list[tuple]  # (row, cells)
    top_users: list
    links: list[tuple[str, str]]  # (budget path, URL of its page)
    csv_name: str
    csv_text: str


def _csv_text(cells: list[list[str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([label for _, label in review_report.COLUMNS])
    writer.writerows(cells)
    return out.getvalue()


class _Reports:
    """Each cluster's report of the week and its users, computed once for every recipient."""

    def __init__(self, start, end, now, tree):
        self.start, self.end, self.now, self.tree = start, end, now, tree
        self.cache: dict[int, tuple] = {}

    def of(self, cluster):
        if cluster.pk not in self.cache:
            self.cache[cluster.pk] = users.report_and_users(cluster, self.start, self.end,
                                                            self.tree, now=self.now)
        return self.cache[cluster.pk]


def sections_for(user, clusters, reports: _Reports) -> list[Section]:
    tops = top_nodes(user, reports.tree)
    query = f"?period=week&date={timezone.localdate(reports.start):%Y-%m-%d}"
    out = []
    for cluster in clusters:
        report, by_budget = reports.of(cluster)
        rows = [row for row in report.rows
                if any(_within(row.node.path, top.path) for top in tops)]
        if not any(row.entitlement_h or row.delivered_h or row.demand_h or row.unallocated_h
                   for row in rows):
            continue  # nothing of theirs on this cluster this week
        cells = review_report.table(rows)
        links = [(top.path, settings.TIMESHARE_BASE_URL
                  + reverse("reports:node_review", args=[cluster.name, top.pk]) + query)
                 for top in tops]
        last = reports.end - timedelta(days=1)
        out.append(Section(
            cluster=cluster,
            columns=[label for _, label in review_report.COLUMNS],
            lines=list(zip(rows, cells, strict=True)),
            top_users=users.top_users(by_budget, {row.node.pk: row.node.path for row in rows}),
            links=links,
            csv_name=f"timeshare-{cluster.name}-{reports.start:%Y-%m-%d}-to-{last:%Y-%m-%d}.csv",
            csv_text=_csv_text(cells),
        ))
    return out


def review_mail(user, sections: list[Section], start: datetime, end: datetime
                ) -> EmailMultiAlternatives:
    context = {
        "user": user, "sections": sections, "start": start, "last_day": end - timedelta(days=1),
        "preferences": settings.TIMESHARE_BASE_URL + reverse("reports:preferences"),
    }
    subject = (f"Timeshare budget review, week of {timezone.localdate(start):%d %b %Y}: "
               + ", ".join(s.cluster.name for s in sections))
    mail = EmailMultiAlternatives(
        subject, render_to_string("reports/email/review_report.txt", context),
        to=[user.email],
        headers={"List-Unsubscribe": f"<{context['preferences']}>"},
    )
    mail.attach_alternative(render_to_string("reports/email/review_report.html", context),
                            "text/html")
    for section in sections:
        mail.attach(section.csv_name, section.csv_text, "text/csv")
    return mail


def claim(user, start: datetime) -> bool:
    """Create the user's delivery row for the week; False if somebody already did."""
    try:
        with transaction.atomic():
            ReportDelivery.objects.create(user=user, period_start=start)
    except IntegrityError:
        return False
    return True


def send_review_reports(now: datetime | None = None) -> int:
    """Mail last week's review report to every subscribed manager and reviewer; the number of
    mails sent."""
    now = now or timezone.now()
    start, end = last_week(now)
    tree = Tree()
    clusters = list(Cluster.objects.with_gpu_count())
    reports = _Reports(start, end, now, tree)
    sent = 0
    for user in recipients().prefetch_related("managed_budgets", "reviewed_budgets"):
        if ReportDelivery.objects.filter(user=user, period_start=start).exists():
            continue
        sections = sections_for(user, clusters, reports)
        if not sections or not claim(user, start):
            continue
        try:
            review_mail(user, sections, start, end).send()
        except Exception as error:  # one bad address or a mail server hiccup: the others go on
            log.exception("review report to %s not sent", user.email)
            ReportDelivery.objects.filter(user=user, period_start=start).update(
                error=f"{type(error).__name__}: {error}"[:500])
            continue
        sent += 1
    return sent
