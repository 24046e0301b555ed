from django.db import migrations, models

from labeling.migrations._sqlite_columns import add_column_in_place


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0012_case_output_may_be_null'),
    ]

    operations = [
        # In place on SQLite, as 0007 to 0010 do (a rebuilt casetally table would lose its triggers).
        *add_column_in_place(
            'casetally', 'priority',
            models.PositiveSmallIntegerField(choices=[(0, 'other cases that need labels'), (10, 'contested judgments'), (20, 'drawn audit-sample cases')], db_default=0, default=0),
            sqlite_definition="smallint unsigned NOT NULL DEFAULT 0 CHECK (priority >= 0)",
        ),
        *add_column_in_place(
            'casetally', 'priority_order',
            models.PositiveIntegerField(db_default=0, default=0),
            sqlite_definition="integer unsigned NOT NULL DEFAULT 0 CHECK (priority_order >= 0)",
        ),
        migrations.AddIndex(
            model_name='casetally',
            index=models.Index(condition=models.Q(('priority__gt', 0)), fields=['dataset', 'rubric', '-priority', 'priority_order', 'case'], name='casetally_priority'),
        ),
    ]
