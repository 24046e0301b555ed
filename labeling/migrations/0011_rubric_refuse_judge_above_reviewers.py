from django.db import migrations, models

from labeling.migrations._sqlite_columns import add_column_in_place


class Migration(migrations.Migration):

    dependencies = [
        ('labeling', '0010_policy_documents_pinned_models'),
    ]

    operations = [
        # In place on SQLite: a rebuilt rubric table would lose the queue's triggers.
        *add_column_in_place(
            'rubric', 'refuse_judge_above_reviewers', models.BooleanField(default=True),
            sqlite_definition="bool NOT NULL DEFAULT 1",
        ),
    ]
