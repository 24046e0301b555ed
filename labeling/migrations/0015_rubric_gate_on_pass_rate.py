from django.db import migrations, models

from labeling.migrations._sqlite_columns import add_column_in_place


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0014_dataset_redaction'),
    ]

    operations = [
        # In place on SQLite: a rebuilt rubric table would lose the queue's triggers.
        *add_column_in_place(
            'rubric', 'gate_on',
            models.CharField(choices=[('every_case', 'every case'), ('pass_rate', 'pass rate')],
                             default='every_case', max_length=10),
            sqlite_definition="varchar(10) NOT NULL DEFAULT 'every_case'",
        ),
        migrations.AddField(
            model_name='rubric',
            name='min_agent_pass_rate',
            field=models.FloatField(blank=True, null=True),
        ),
    ]
