"""Clusters, hosts, host events and capacity rollups move from ``scheduler`` to ``fleet``.

Only Django's state moves: the tables keep their names (``db_table``) and every row stays
where it is. The content types follow the models, so the permission ``operate_fleet`` given
to the operators' group keeps its row and its holders."""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


MOVED = ["cluster", "host", "hostevent", "capacityrollup"]


def _move_content_types(apps, old: str, new: str) -> None:
    content_types = apps.get_model("contenttypes", "ContentType")
    content_types.objects.filter(app_label=old, model__in=MOVED).update(app_label=new)


def content_types_to_fleet(apps, schema_editor):
    _move_content_types(apps, "scheduler", "fleet")


def content_types_to_scheduler(apps, schema_editor):
    _move_content_types(apps, "fleet", "scheduler")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("scheduler", "0004_event_kind_at_index"),
    ]

    state_operations = [
        migrations.CreateModel(
            name='Cluster',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.SlugField(unique=True)),
                ('gpu_type', models.CharField(help_text='e.g. H100, B200', max_length=50)),
                ('description', models.CharField(blank=True, max_length=200)),
                ('max_min_runtime', models.PositiveIntegerField(default=28800, help_text='Longest minimum runtime a workload may declare, in seconds.', validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(604800)])),
                ('window', models.PositiveIntegerField(default=604800, help_text='Fair-share lookback window, in seconds.', validators=[django.core.validators.MinValueValidator(3600), django.core.validators.MaxValueValidator(7776000)])),
                ('hysteresis', models.FloatField(default=0.1, validators=[django.core.validators.MinValueValidator(0), django.core.validators.MaxValueValidator(10)])),
                ('grace', models.PositiveIntegerField(default=300, help_text='Seconds a preempted run keeps its GPUs to checkpoint.', validators=[django.core.validators.MaxValueValidator(86400)])),
                ('backend', models.CharField(choices=[('simulated', 'Simulated fleet'), ('slurm', 'Slurm')], default='simulated', max_length=20)),
                ('backend_config', models.JSONField(blank=True, default=dict, help_text='Backend settings. Slurm: slurm_conf, partition, repair_command, unknown_jobs (fleet/backends/slurm.py); simulated: e.g. failure_rate_per_host_day.')),
                ('backend_error', models.CharField(blank=True, max_length=1000)),
                ('backend_error_at', models.DateTimeField(blank=True, null=True)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'db_table': 'scheduler_cluster',
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Host',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('gpus', models.PositiveSmallIntegerField(validators=[django.core.validators.MinValueValidator(1)])),
                ('group', models.CharField(blank=True, help_text='Network group (e.g. a rail).', max_length=50)),
                ('state', models.CharField(choices=[('AVAILABLE', 'Available'), ('DRAINING', 'Draining'), ('DRAINED', 'Drained'), ('REPAIRING', 'Repairing'), ('DOWN', 'Down'), ('ESCALATED', 'Escalated')], default='AVAILABLE', max_length=10)),
                ('state_reason', models.CharField(blank=True, max_length=500)),
                ('state_changed', models.DateTimeField(default=django.utils.timezone.now)),
                ('last_heartbeat', models.DateTimeField(blank=True, null=True)),
                ('failed_repairs', models.PositiveSmallIntegerField(default=0, help_text='Failed repairs in a row; escalated to a human past the limit.')),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='hosts', to='fleet.cluster')),
            ],
            options={
                'db_table': 'scheduler_host',
                'ordering': ['cluster', 'name'],
                'permissions': [('operate_fleet', 'Can drain, repair and operate hosts')],
            },
        ),
        migrations.CreateModel(
            name='HostEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ('kind', models.CharField(choices=[('drain_requested', 'Drain Requested'), ('health_signal', 'Health Signal'), ('drained', 'Drained'), ('failed', 'Failed'), ('repair_started', 'Repair Started'), ('repair_succeeded', 'Repair Succeeded'), ('repair_failed', 'Repair Failed'), ('escalated', 'Escalated'), ('returned', 'Returned')], max_length=20)),
                ('reason', models.CharField(blank=True, max_length=500)),
                ('needed_human', models.BooleanField(default=False)),
                ('by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('host', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='fleet.host')),
            ],
            options={
                'db_table': 'scheduler_hostevent',
                'ordering': ['-at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='CapacityRollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hour', models.DateTimeField()),
                ('gpu_seconds', models.FloatField(default=0)),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='capacity_rollups', to='fleet.cluster')),
            ],
            options={
                'db_table': 'scheduler_capacityrollup',
                'constraints': [models.UniqueConstraint(fields=('cluster', 'hour'), name='one_capacity_rollup_per_hour')],
            },
        ),
        migrations.AddConstraint(
            model_name='host',
            constraint=models.UniqueConstraint(fields=('cluster', 'name'), name='host_name_unique_in_cluster'),
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations),
        migrations.RunPython(content_types_to_fleet, content_types_to_scheduler),
    ]
