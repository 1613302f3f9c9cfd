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
    """The dashboards' range: the last day, week or 30 days up to now, or custom dates."""

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
        # daily buckets, today included
        end = midnight(timezone.localdate(now) + timedelta(days=1))
        return end - timedelta(days=7 if choice == "week" else 30), end, choice
