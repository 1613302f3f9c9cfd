"""The one definition of the workload filters (django-filter, as NetBox does): the list page,
its CSV export and the API list all read the same query parameters.

    workloads = WorkloadFilterSet(request.GET, Workload.objects.all(), request=request).qs

The queryset is always restricted to what the user may see first (scheduler.permissions);
search, filters and sort only narrow and order it. Invalid values give no rows, and `errors`
says why (the API answers them as a 400).
"""

import django_filters as filters
from django.db.models import F, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce

from budgets.models import BudgetNode
from budgets.permissions import roles
from fleet.models import Cluster, Host
from scheduler.engine.contract import DEBUG_MAX_GPUS, DEBUG_MAX_MIN_RUNTIME
from scheduler.models import Workload
from scheduler.permissions import restrict_workloads, within_my_budgets

ACTIVE = "active"
FINISHED = "finished"
SCOPES = [("all", "All I may see"), ("mine", "Mine"), ("projects", "My projects")]
CLASSES = [  # DESIGN.md, "Workload classes"
    ("debug", "debug"), ("small", "small"), ("large", "large (several hosts)"),
    ("unallocated", "unallocated"),
]
# A cluster without hosts yet: the class a workload would have on the usual 8-GPU host.
DEFAULT_HOST_GPUS = 8

# The list's columns, in order: (sort key, the ordering it stands for, header). None: the
# column does not sort (where a workload runs or why it waits is not one value).
COLUMNS = [
    ("id", "id", "#"),
    ("name", "name", "Name"),
    ("owner", "owner__username", "Owner"),
    ("budget", "budget__path", "Budget"),
    ("cluster", "cluster__name", "Cluster"),
    ("gpus", "gpus", "GPUs"),
    ("contract", "min_runtime", "Contract"),
    ("state", "state", "State"),
    (None, None, "Why / where"),
    ("submitted", "submitted", "Submitted"),
]
DEFAULT_SORT = "-submitted"


def filterable_budgets(request):
    """The budgets a user may filter workloads by: those whose workloads they may see (all
    for operators; else the subtrees they manage and the budgets they belong to)."""
    who = roles(request.user)
    if who.superuser or who.operator:
        return BudgetNode.objects.all()
    return BudgetNode.objects.restrict(request.user, "history")


def _debug() -> Q:
    return Q(min_runtime__gt=0, min_runtime__lte=DEBUG_MAX_MIN_RUNTIME,
             gpus__lte=DEBUG_MAX_GPUS)


def _with_host_gpus(queryset):
    """``host_gpus``: the largest host of the workload's cluster, which decides whether it
    fits on one host (small) or spans several (large), as the reports count it."""
    largest = Host.objects.filter(cluster=OuterRef("cluster_id")).order_by("-gpus")
    return queryset.annotate(host_gpus=Coalesce(
        Subquery(largest.values("gpus")[:1]), Value(DEFAULT_HOST_GPUS),
        output_field=IntegerField(),
    ))


class WorkloadFilterSet(filters.FilterSet):
    q = filters.CharFilter(method="search", label="Search",
                           help_text="Name, owner or budget contains this.")
    scope = filters.ChoiceFilter(choices=SCOPES, method="filter_scope", empty_label=None)
    state = filters.ChoiceFilter(
        choices=[(ACTIVE, "active"), (FINISHED, "finished"), *Workload.State.choices],
        method="filter_state", empty_label="any state",
    )
    cluster = filters.ModelChoiceFilter(
        queryset=Cluster.objects.all(),
        to_field_name="name", empty_label="any cluster",
    )
    budget = filters.ModelChoiceFilter(
        queryset=filterable_budgets, to_field_name="path", method="filter_budget",
        empty_label="any budget", help_text="The budget and everything below it.",
        error_messages={"invalid_choice": "No such budget, or not one whose workloads you "
                                          "may see."},
    )
    sort = filters.OrderingFilter(
        fields=[(field, key) for key, field, _ in COLUMNS if key], label="Sort",
        field_labels={field: label for key, field, label in COLUMNS if key},
        help_text="A column (id, name, owner, budget, cluster, gpus, contract, state, "
                  "submitted); a leading - sorts descending. Default: newest first.",
    )

    class Meta:
        model = Workload
        fields = []

    def __init__(self, data=None, queryset=None, *, request, **kwargs):
        super().__init__(data, restrict_workloads(queryset, request.user), request=request,
                         **kwargs)
        self.form.fields["budget"].label_from_instance = lambda node: node.path

    @property
    def qs(self):
        if self.is_bound and not self.is_valid():
            return self.queryset.none()
        return super().qs

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        if self.form.cleaned_data.get("sort"):
            # a stable order for the pages: among equal values, newest first
            queryset = queryset.order_by(*queryset.query.order_by, "-id")
        return queryset

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(owner__username__icontains=value)
                               | Q(budget__path__icontains=value))

    def filter_scope(self, queryset, name, value):
        if value == "mine":
            return queryset.filter(owner=self.request.user)
        if value == "projects":
            return within_my_budgets(queryset, self.request.user)
        return queryset

    def filter_state(self, queryset, name, value):
        if value == ACTIVE:
            return queryset.filter(state__in=Workload.ACTIVE_STATES)
        if value == FINISHED:
            return queryset.exclude(state__in=Workload.ACTIVE_STATES)
        return queryset.filter(state=value)

    def filter_budget(self, queryset, name, value):
        return queryset.filter(budget__in=BudgetNode.objects.subtree(value.path))

    def filter_class(self, queryset, name, value):
        if value == "unallocated":
            return queryset.filter(min_runtime=0)
        if value == "debug":
            return queryset.filter(_debug())
        queryset = _with_host_gpus(queryset).filter(min_runtime__gt=0).exclude(_debug())
        if value == "small":
            return queryset.filter(gpus__lte=F("host_gpus"))
        return queryset.filter(gpus__gt=F("host_gpus"))

    @property
    def sorted_by(self) -> str:
        """The sort in force: the one asked for if valid, else newest first."""
        if self.is_valid() and self.form.cleaned_data.get("sort"):
            return self.form.cleaned_data["sort"][0]
        return DEFAULT_SORT

    def columns(self) -> list[dict]:
        """The list's headers: each sortable one with the sort its link asks for (ascending
        first, then flipping) and its current direction for ``aria-sort``."""
        current = self.sorted_by
        headers = []
        for key, _, label in COLUMNS:
            direction = None
            if key and current.lstrip("-") == key:
                direction = "descending" if current.startswith("-") else "ascending"
            headers.append({
                "key": key, "label": label, "direction": direction,
                "sort": f"-{key}" if direction == "ascending" else key,
            })
        return headers


# "class" is a keyword in Python, so this filter cannot be declared in the class body; the
# query parameter keeps the word DESIGN.md uses.
WorkloadFilterSet.base_filters["class"] = filters.ChoiceFilter(
    field_name="class", choices=CLASSES, method="filter_class", label="Class",
    empty_label="any class",
)
