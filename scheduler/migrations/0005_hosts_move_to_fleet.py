"""Clusters, hosts, host events and capacity rollups now belong to ``fleet``: the foreign keys
point there and the models leave ``scheduler``'s state; no table changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('budgets', '0003_cluster_in_fleet'),
        ('fleet', '0001_initial'),
        ('reports', '0002_cluster_in_fleet'),
        ('scheduler', '0004_event_kind_at_index'),
    ]

    state_operations = [
        migrations.AlterField(
            model_name='occupancysample',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='samples', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='usagerollup',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_rollups', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='workload',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='workloads', to='fleet.cluster'),
        ),
        migrations.RemoveField(
            model_name='host',
            name='cluster',
        ),
        migrations.AlterField(
            model_name='rungpu',
            name='host',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='assigned_gpus', to='fleet.host'),
        ),
        migrations.RemoveField(
            model_name='hostevent',
            name='host',
        ),
        migrations.RemoveField(
            model_name='hostevent',
            name='by',
        ),
        migrations.DeleteModel(
            name='CapacityRollup',
        ),
        migrations.DeleteModel(
            name='Cluster',
        ),
        migrations.DeleteModel(
            name='Host',
        ),
        migrations.DeleteModel(
            name='HostEvent',
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
