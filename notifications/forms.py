from django import forms

from notifications import services
from notifications.kinds import Channel, Kind, Timing


class PreferencesForm(forms.Form):
    """Per kind of notification: where (in the app, by email, both, none) and when."""

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        current = services.preferences_of(user)
        for kind in Kind:
            channel, timing = current[kind]
            self.fields[f"{kind}_channel"] = forms.ChoiceField(
                choices=Channel.choices, initial=channel, label=kind.label
            )
            self.fields[f"{kind}_timing"] = forms.ChoiceField(
                choices=Timing.choices, initial=timing, label=f"{kind.label}: email when"
            )

    def rows(self):
        return [(kind.label, self[f"{kind}_channel"], self[f"{kind}_timing"]) for kind in Kind]

    def save(self):
        for kind in Kind:
            services.set_preference(
                self.user, kind, self.cleaned_data[f"{kind}_channel"],
                self.cleaned_data[f"{kind}_timing"],
            )
