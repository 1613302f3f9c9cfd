import re
import uuid

from django import forms

from budgets.models import BudgetNode
from fleet.models import Cluster
from scheduler.models import GPUS_MAX

_MINUTES = re.compile(r"^\s*(\d+)\s*$")
_HOURS_MINUTES = re.compile(r"^\s*(\d+):([0-5]\d)\s*$")


def parse_duration(text: str) -> int:
    """Seconds from "90" (minutes) or "1:30" (hours:minutes)."""
    if match := _MINUTES.match(text):
        return int(match[1]) * 60
    if match := _HOURS_MINUTES.match(text):
        return int(match[1]) * 3600 + int(match[2]) * 60
    raise ValueError(text)


def format_duration(seconds: int | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}"


class DurationField(forms.CharField):
    """A duration typed in minutes ("90") or hours:minutes ("1:30"); cleans to seconds."""

    default_error_messages = {
        "invalid": "Enter minutes (e.g. 90) or hours:minutes (e.g. 1:30), not negative.",
    }

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return parse_duration(value)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None

    def prepare_value(self, value):
        return format_duration(value) if isinstance(value, int) else value


class SubmitForm(forms.Form):
    """Field names match services.submit's keywords and SubmissionError.field."""

    name = forms.CharField(max_length=100)
    budget = forms.ModelChoiceField(
        queryset=BudgetNode.objects.none(),
        empty_label=None,
        label="Budget",
        error_messages={
            "invalid_choice": "You are not a member of that budget: charge one of your own "
            "budget leaves.",
        },
    )
    cluster = forms.ModelChoiceField(queryset=Cluster.objects.all(), empty_label=None)
    gpus = forms.IntegerField(min_value=1, max_value=GPUS_MAX, label="GPUs")
    min_runtime = DurationField(
        label="Minimum runtime",
        help_text="Minutes or h:mm, from 0 to the cluster's maximum.",
    )
    resumable = forms.BooleanField(
        required=False, label="Resumable (it checkpoints and can restart)"
    )
    command = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), label="Command or container image"
    )
    expected_duration = DurationField(
        required=False,
        label="Expected duration",
        help_text="Optional, minutes or h:mm; the simulated fleet finishes the run then.",
    )
    # One-time token: a double click or a resent POST gives the first submission's answer
    # instead of queueing the workload twice (common.idempotency).
    submit_token = forms.CharField(
        widget=forms.HiddenInput, max_length=64,
        error_messages={"required": "This form is out of date: reload the page and submit again."},
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["submit_token"].initial = uuid.uuid4().hex
        self.fields["budget"].queryset = BudgetNode.objects.filter(
            members=user, children=None
        ).order_by("path")
        self.fields["budget"].label_from_instance = lambda node: f"{node.path} ({node.name})"

    def clean_expected_duration(self):
        value = self.cleaned_data["expected_duration"]
        if value == 0:
            raise forms.ValidationError("Leave it empty or give a positive duration.")
        return value


class DrainForm(forms.Form):
    reason = forms.CharField(
        max_length=500, widget=forms.TextInput(attrs={"placeholder": "e.g. GPU 3 ECC errors"})
    )
