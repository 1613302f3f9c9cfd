# Index for the reports: events looked up by kind and time (requeues, waits).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduler', '0003_slurm_backend'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='event',
            index=models.Index(fields=['kind', 'at'], name='event_kind_at'),
        ),
    ]
