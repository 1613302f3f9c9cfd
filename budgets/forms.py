from django import forms

from budgets.models import MAX_SHARES, BudgetNode, ChangeRequest, MembershipChange
from fleet.models import Cluster


class SharesForm(forms.Form):
    node = forms.IntegerField(widget=forms.HiddenInput)
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=0)
    shares = forms.IntegerField(min_value=1, max_value=MAX_SHARES)
    reason = forms.CharField(max_length=500, required=False)
    effective_at = forms.DateTimeField(required=False, label="From (UTC; empty: now)")
    expires_at = forms.DateTimeField(required=False, label="Expires (UTC; empty: never)")


class ChangeRequestForm(forms.Form):
    kind = forms.ChoiceField(
        choices=ChangeRequest.Kind.choices, initial=ChangeRequest.Kind.SHARES,
        widget=forms.RadioSelect, label="Ask for", required=False,
    )
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    shares = forms.IntegerField(min_value=1, max_value=MAX_SHARES, required=False)
    percent = forms.DecimalField(
        min_value=0.01, max_value=99.99, decimal_places=2, required=False,
        label="or % of parent",
    )
    boost_until = forms.DateTimeField(
        required=False, label="Boost until (UTC)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    child_name = forms.CharField(max_length=100, required=False, label="New budget's name")
    child_slug = forms.SlugField(max_length=50, required=False, label="New budget's short name")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=2000)

    def clean(self):
        data = super().clean()
        data["kind"] = data.get("kind") or ChangeRequest.Kind.SHARES
        child = data["kind"] == ChangeRequest.Kind.CHILD
        if not self.errors and not child and (
            (data.get("shares") is None) == (data.get("percent") is None)
        ):
            raise forms.ValidationError("Ask for either shares or a percentage of the parent.")
        return data


class CommentForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=5000,
                           label="Comment")


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)


class MoveForm(forms.Form):
    parent = forms.ModelChoiceField(queryset=BudgetNode.objects.none(), label="New parent")
    reason = forms.CharField(max_length=500, required=False)

    def __init__(self, *args, parents=None, **kwargs):
        super().__init__(*args, **kwargs)
        if parents is not None:
            self.fields["parent"].queryset = parents


class ChildForm(forms.ModelForm):
    # Only the root is an organisation: a child is a program, a project or a researcher.
    kind = forms.ChoiceField(
        choices=[c for c in BudgetNode.Kind.choices if c[0] != BudgetNode.Kind.ORGANISATION]
    )

    class Meta:
        model = BudgetNode
        fields = ["name", "slug", "kind", "description"]


class AddPersonForm(forms.Form):
    person = forms.CharField(max_length=254, label="Username or email")
    role = forms.ChoiceField(choices=MembershipChange.Role.choices, initial="member")
    reason = forms.CharField(max_length=500, required=False)


class RemovePersonForm(forms.Form):
    person = forms.CharField(max_length=254, widget=forms.HiddenInput)
    role = forms.ChoiceField(choices=MembershipChange.Role.choices, widget=forms.HiddenInput)
    reason = forms.CharField(max_length=500, required=False)
    move_to = forms.ModelChoiceField(
        queryset=BudgetNode.objects.none(), required=False,
        empty_label="cancel their pending work here", label="Pending work",
    )

    def __init__(self, *args, leaves=None, **kwargs):
        super().__init__(*args, **kwargs)
        if leaves is not None:
            self.fields["move_to"].queryset = leaves


class ReviewCycleForm(forms.Form):
    organisation = forms.ModelChoiceField(queryset=BudgetNode.objects.none(), empty_label=None)
    name = forms.CharField(max_length=100, help_text="Such as 2027 Q1.")
    opens_at = forms.DateTimeField(
        label="Opens (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    due_at = forms.DateTimeField(
        label="Deadline (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    repeat_months = forms.IntegerField(
        min_value=1, max_value=24, required=False, label="Repeat every (months)",
        help_text="3: quarterly; empty: once.",
    )

    def __init__(self, *args, organisations=None, **kwargs):
        super().__init__(*args, **kwargs)
        if organisations is not None:
            self.fields["organisation"].queryset = organisations


class ReviewDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("confirm", "Confirm"), ("change", "Change")])
    shares = forms.IntegerField(min_value=1, max_value=MAX_SHARES, required=False)
    comment = forms.CharField(max_length=2000, required=False)

    def clean(self):
        data = super().clean()
        if data.get("decision") == "change" and data.get("shares") is None and not self.errors:
            self.add_error("shares", "Give the new shares.")
        return data
