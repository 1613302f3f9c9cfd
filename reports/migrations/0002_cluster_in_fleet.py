"""What-ifs point at ``fleet.Cluster`` (the same table as before: state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0001_initial'),
        ('reports', '0001_initial'),
    ]

    state_operations = [
        migrations.AlterField(
            model_name='whatif',
            name='cluster',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='what_ifs', to='fleet.cluster'),
        ),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations)]
