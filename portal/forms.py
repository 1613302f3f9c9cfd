from django import forms

from portal.time_zones import zone_names


class SettingsForm(forms.Form):
    time_zone = forms.ChoiceField(
        required=False, label="Time zone",
        help_text="Every time in the portal is shown in this zone and labelled with it.",
        error_messages={"invalid_choice": "%(value)s is not a time zone we know (an IANA name "
                                          "such as Europe/Paris)."},
    )

    def __init__(self, *args, browser_zone=None, **kwargs):
        super().__init__(*args, **kwargs)
        default = f"Your browser's ({browser_zone})" if browser_zone else "Your browser's"
        self.fields["time_zone"].choices = [("", default)] + [
            (name, name.replace("_", " ")) for name in sorted(zone_names())
        ]
