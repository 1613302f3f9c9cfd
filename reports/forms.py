"""Periods of the review report and ranges of the dashboards, read from the query string."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import forms
from django.utils import timezone

PERIODS = [("week", "Week"), ("month", "Month"), ("quarter", "Quarter"), ("custom", "Custom")]
RANGES = [("day", "Last day"), ("week", "Last week"), ("month", "Last 30 days"),
          ("custom", "Custom")]
LONGEST = timedelta(days=400)


def midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


class CustomDatesMixin:
    def clean(self):
        data = super().clean()
        if "custom" in (data.get("period"), data.get("range")):
            start, end = data.get("start"), data.get("end")
            if not start or not end:
                raise forms.ValidationError("A custom period needs a start and an end date.")
            if end < start:
                raise forms.ValidationError("The end date is before the start date.")
            if end - start > LONGEST:
                raise forms.ValidationError("A custom period is at most 400 days.")
        return data


class PeriodForm(CustomDatesMixin, forms.Form):
    """The review period: the calendar week, month or quarter containing `date`, or custom
    dates (both inclusive). Invalid input falls back to the current month, with the errors."""

    period = forms.ChoiceField(choices=PERIODS, required=False)
    date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}),
                           label="Containing")
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def bounds(self, today: date | None = None) -> tuple[datetime, datetime, str]:
        today = today or timezone.localdate()
        data = self.cleaned_data if self.is_valid() else {}
        period = data.get("period") or "month"
        if period == "custom":
            return midnight(data["start"]), midnight(data["end"] + timedelta(days=1)), period
        day = data.get("date") or today
        if period == "week":
            first = day - timedelta(days=day.weekday())
            return midnight(first), midnight(first + timedelta(days=7)), period
        if period == "quarter":
            first = date(day.year, 3 * ((day.month - 1) // 3) + 1, 1)
            months = 3
        else:
            first = date(day.year, day.month, 1)
            months = 1
        month = first.month - 1 + months
        following = date(first.year + month // 12, month % 12 + 1, 1)
        return midnight(first), midnight(following), period


class RangeForm(CustomDatesMixin, forms.Form):
    """The dashboards' range: the last 24 hours (hourly, the current hour in progress), the
    last 7 or 30 complete days, or custom dates."""

    range = forms.ChoiceField(choices=RANGES, required=False)
    start = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def bounds(self, now: datetime | None = None) -> tuple[datetime, datetime, str]:
        now = now or timezone.now()
        data = self.cleaned_data if self.is_valid() else {}
        choice = data.get("range") or "week"
        if choice == "custom":
            return midnight(data["start"]), midnight(data["end"] + timedelta(days=1)), choice
        if choice == "day":  # hourly buckets, up to the current hour
            end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            return end - timedelta(days=1), end, choice
        # daily buckets: the last 7 (30) complete days, up to this midnight
        end = midnight(timezone.localdate(now))
        return end - timedelta(days=7 if choice == "week" else 30), end, choice


class WhatIfForm(forms.Form):
    """The what-if's parameters, in the units people think in, and new shares for the nodes
    the user may change (``shares_<id>``; blank or unchanged: today's)."""

    days = forms.IntegerField(min_value=1, max_value=90, initial=7,
                              label="Replay the last (days)")
    window_days = forms.FloatField(min_value=1 / 24, max_value=90, label="Window (days)")
    max_min_runtime_hours = forms.FloatField(min_value=0, max_value=168,
                                             label="Maximum minimum runtime (hours)")
    hysteresis = forms.FloatField(min_value=0, max_value=10)
    preempt_idle = forms.BooleanField(required=False, label="Preempt idle allocated runs")

    def __init__(self, *args, cluster, nodes, shares: dict[int, int], **kwargs):
        super().__init__(*args, **kwargs)
        self.cluster, self.nodes, self.current = cluster, nodes, shares
        self.fields["window_days"].initial = round(cluster.window / 86400, 3)
        self.fields["max_min_runtime_hours"].initial = round(cluster.max_min_runtime / 3600, 3)
        self.fields["hysteresis"].initial = cluster.hysteresis
        self.fields["preempt_idle"].initial = cluster.preempt_idle
        for node in nodes:
            self.fields[f"shares_{node.pk}"] = forms.IntegerField(
                min_value=0, max_value=1_000_000, required=False, label=node.path,
                initial=shares.get(node.pk, 0),
            )

    def share_fields(self):
        return [(node, self[f"shares_{node.pk}"]) for node in self.nodes]

    def params(self) -> dict:
        data = self.cleaned_data
        changed = {}
        for node in self.nodes:
            value = data.get(f"shares_{node.pk}")
            if value is not None and value != self.current.get(node.pk, 0):
                changed[node.path] = value
        return {
            "days": data["days"],
            "window": round(data["window_days"] * 86400),
            "max_min_runtime": round(data["max_min_runtime_hours"] * 3600),
            "hysteresis": data["hysteresis"],
            "preempt_idle": data["preempt_idle"],
            "shares": changed,
        }


class ParameterSetForm(forms.Form):
    """One parameter set of a what-if comparison, in the units people think in."""

    window_days = forms.FloatField(min_value=1 / 24, max_value=90, label="Window (days)")
    max_min_runtime_hours = forms.FloatField(min_value=0, max_value=168,
                                             label="Maximum minimum runtime (hours)")
    grace_minutes = forms.FloatField(min_value=0, max_value=24 * 60, label="Grace (minutes)")
    hysteresis = forms.FloatField(min_value=0, max_value=10)

    def has_changed(self) -> bool:
        """An optional set left as it was, or emptied, is no set."""
        return super().has_changed() and any(
            self.data.get(self.add_prefix(name), "") != "" for name in self.fields)

    def params(self) -> dict:
        data = self.cleaned_data
        return {
            "window": round(data["window_days"] * 86400),
            "max_min_runtime": round(data["max_min_runtime_hours"] * 3600),
            "grace": round(data["grace_minutes"] * 60),
            "hysteresis": data["hysteresis"],
        }


class BaseParameterSetFormSet(forms.BaseFormSet):
    def clean(self):
        if any(self.errors):
            return
        seen = set()
        for form in self.filled():
            key = tuple(sorted(form.params().items()))
            if key in seen:
                raise forms.ValidationError("Two sets are the same: change one of them.")
            seen.add(key)

    def by_parameter(self) -> list[tuple[str, list]]:
        """The sets as a table: per parameter, its label and each set's field."""
        return [(field.label or name.capitalize(), [form[name] for form in self.forms])
                for name, field in ParameterSetForm.base_fields.items()]

    def filled(self) -> list[ParameterSetForm]:
        """The sets to replay: the first two, and the third if it was changed."""
        return [form for form in self.forms if form.has_changed() or not form.empty_permitted]


# two sets at least, a third one optional, never more (each set is a replay on the workers)
ParameterSetFormSet = forms.formset_factory(
    ParameterSetForm, formset=BaseParameterSetFormSet, extra=1, min_num=2, max_num=3,
    absolute_max=3, validate_min=True, validate_max=True,
)


def parameter_sets(data=None, *, cluster) -> BaseParameterSetFormSet:
    """The comparison's sets, each starting at the cluster's parameters of today."""
    current = {
        "window_days": round(cluster.window / 86400, 3),
        "max_min_runtime_hours": round(cluster.max_min_runtime / 3600, 3),
        "grace_minutes": round(cluster.grace / 60, 3),
        "hysteresis": cluster.hysteresis,
    }
    return ParameterSetFormSet(data, prefix="set", form_kwargs={"initial": current})


class ComparisonForm(forms.Form):
    days = forms.IntegerField(min_value=1, max_value=90, initial=7,
                              label="Replay the last (days)")
