"""A case's output may be null: no answer yet (a golden-set case), distinct from an empty answer.

On SQLite a column becomes nullable only by rebuilding its table, which drops the table's triggers (the
queue's, migrations 0003, 0004 and 0006), and triggers on other tables that name it break the rebuild. So
there every trigger is kept aside, dropped, and created again as it was once the table is rebuilt.
PostgreSQL just drops the NOT NULL.
"""

from django.db import migrations, models


def _without_triggers(schema_editor, change) -> None:
    if schema_editor.connection.vendor != "sqlite":
        change()
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql IS NOT NULL ORDER BY name")
        triggers = cursor.fetchall()
    for name, _ in triggers:
        schema_editor.execute(f"DROP TRIGGER {schema_editor.quote_name(name)}")
    change()
    for _, sql in triggers:
        schema_editor.execute(sql)


def _output_fields(apps):
    model = apps.get_model("labeling", "Case")
    nullable = model._meta.get_field("output")
    required = models.TextField()
    required.set_attributes_from_name("output")
    required.model = model
    return model, required, nullable


def forwards(apps, schema_editor) -> None:
    model, required, nullable = _output_fields(apps)
    _without_triggers(schema_editor, lambda: schema_editor.alter_field(model, required, nullable))


def backwards(apps, schema_editor) -> None:
    model, required, nullable = _output_fields(apps)
    model.objects.filter(output__isnull=True).update(output="")  # no answer yet reads as an empty answer again
    _without_triggers(schema_editor, lambda: schema_editor.alter_field(model, nullable, required))


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0011_rubric_refuse_judge_above_reviewers"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="case", name="output", field=models.TextField(blank=True, null=True)),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
