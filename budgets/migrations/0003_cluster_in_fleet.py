"""Allocations point at ``fleet.Cluster`` (the same table as before: state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('budgets', '0002_initial'),
        ('fleet', '0001_initial'),
    ]

    state_operations = [
        migrations.AlterField(
            model_name='allocation',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='allocationchange',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='allocation_changes', to='fleet.cluster'),
        ),
        migrations.AlterField(
            model_name='changerequest',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='change_requests', to='fleet.cluster'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
