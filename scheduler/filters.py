"""The one definition of the workload filters: the list page, its CSV export and the API.

    workloads = WorkloadFilterSet(request.GET, Workload.objects.all(), request.user).qs

The queryset is always restricted to what the user may see first (scheduler.permissions);
the filters only narrow it. Invalid filter values give no rows and `errors` says why.
"""

from django import forms

from budgets.models import BudgetNode
from budgets.permissions import roles
from fleet.models import Cluster
from scheduler.models import Workload
from scheduler.permissions import restrict_workloads, within_my_budgets

ACTIVE = "active"
FINISHED = "finished"


class WorkloadFilterForm(forms.Form):
    SCOPES = [("all", "All I may see"), ("mine", "Mine"), ("projects", "My projects")]

    scope = forms.ChoiceField(choices=SCOPES, required=False)
    state = forms.ChoiceField(
        choices=[("", "any state"), (ACTIVE, "active"), (FINISHED, "finished")]
        + list(Workload.State.choices),
        required=False,
    )
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.all(), to_field_name="name", required=False,
        empty_label="any cluster",
    )
    budget = forms.ModelChoiceField(
        queryset=BudgetNode.objects.all(), to_field_name="path", required=False,
        empty_label="any budget", help_text="The budget and everything below it.",
        error_messages={"invalid_choice": "No such budget, or not one whose workloads you "
                                          "may see."},
    )


def filterable_budgets(user):
    """The budgets a user may filter workloads by: those whose workloads they may see (all
    for operators; else the subtrees they manage and the budgets they belong to)."""
    who = roles(user)
    if who.superuser or who.operator:
        return BudgetNode.objects.all()
    return BudgetNode.objects.restrict(user, "history")


class WorkloadFilterSet:
    form_class = WorkloadFilterForm

    def __init__(self, data, queryset, user):
        self.user = user
        self.queryset = queryset
        self.form = self.form_class(data or {})
        self.form.fields["budget"].queryset = filterable_budgets(user)
        self.form.fields["budget"].label_from_instance = lambda node: node.path

    @property
    def errors(self):
        return self.form.errors

    def is_valid(self) -> bool:
        return self.form.is_valid()

    @property
    def qs(self):
        queryset = restrict_workloads(self.queryset, self.user)
        if not self.is_valid():
            return queryset.none()
        data = self.form.cleaned_data
        scope = data["scope"] or "all"
        if scope == "mine":
            queryset = queryset.filter(owner=self.user)
        elif scope == "projects":
            queryset = within_my_budgets(queryset, self.user)
        if data["state"] == ACTIVE:
            queryset = queryset.filter(state__in=Workload.ACTIVE_STATES)
        elif data["state"] == FINISHED:
            queryset = queryset.exclude(state__in=Workload.ACTIVE_STATES)
        elif data["state"]:
            queryset = queryset.filter(state=data["state"])
        if data["cluster"]:
            queryset = queryset.filter(cluster=data["cluster"])
        if budget := data["budget"]:
            queryset = queryset.filter(budget__in=BudgetNode.objects.subtree(budget.path))
        return queryset
