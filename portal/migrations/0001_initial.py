import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("name", models.CharField(help_text="What it is for, e.g. 'laptop CLI'.",
                                          max_length=100)),
                ("prefix", models.CharField(editable=False, max_length=10)),
                ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires", models.DateTimeField(blank=True, null=True)),
                ("last_used", models.DateTimeField(blank=True, null=True)),
                ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                           related_name="api_tokens",
                                           to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["-created", "-id"]},
        ),
    ]
