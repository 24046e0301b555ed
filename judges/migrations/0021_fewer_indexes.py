"""Indexes that only cost writes dropped.

Judgment.run and RunCaseTally.run lose their own index: run leads each table's unique index, which serves
every lookup by run. The cache tables' keys become unique constraints: `unique=True` also gave them, on
PostgreSQL, an index for LIKE searches that nothing makes. The constraints are added before the old unique
indexes go, so a key is never without one.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("judges", "0020_cachedembedding_vector_storage")]

    operations = [
        migrations.AddConstraint(
            model_name="cachedembedding",
            constraint=models.UniqueConstraint(fields=("key",), name="cachedembedding_unique_key"),
        ),
        migrations.AddConstraint(
            model_name="cachedjudgment",
            constraint=models.UniqueConstraint(fields=("key",), name="cachedjudgment_unique_key"),
        ),
        migrations.AlterField(model_name="cachedembedding", name="key", field=models.CharField(max_length=64)),
        migrations.AlterField(model_name="cachedjudgment", name="key", field=models.CharField(max_length=64)),
        migrations.AlterField(
            model_name="judgment",
            name="run",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="judgments", to="judges.run"),
        ),
        migrations.AlterField(
            model_name="runcasetally",
            name="run",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="case_tallies", to="judges.run"),
        ),
    ]
