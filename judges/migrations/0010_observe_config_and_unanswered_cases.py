"""Observe from day one: an audit entry may name the config CI runs instead of a run (entering observe, a
switch at observe). A run counts the cases it left out for having no answer yet."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('judges', '0009_run_unknown_cost_judgments'),
    ]

    operations = [
        migrations.AddField(
            model_name='rubricevent',
            name='config',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='judges.judgeconfig'),
        ),
        migrations.AddField(
            model_name='run',
            name='unanswered',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='rubricevent',
            name='kind',
            field=models.CharField(choices=[('promote', 'promotion'), ('renew', 'renewal'), ('switch', 'CI config switch'), ('demote', 'demotion'), ('thresholds', 'thresholds change'), ('fail_closed', 'fail_closed change')], max_length=12),
        ),
    ]
