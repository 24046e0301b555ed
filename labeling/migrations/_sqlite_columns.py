"""AddField for the labeling tables that keep triggers (cases, rubrics, labels, label requests).

On SQLite, Django adds a NOT NULL column with a default by rebuilding the table, and a rebuilt table
loses its triggers (and a trigger naming it breaks the rebuild). SQLite can add such a column in place
(`ALTER TABLE … ADD COLUMN … NOT NULL DEFAULT …`), so these migrations do that there, and the usual
AddField elsewhere. Not a migration module itself (the leading underscore).
"""

from django.db import migrations


def add_column_in_place(model_name: str, name: str, field, *, sqlite_definition: str):
    """The operations of an AddField that SQLite runs as a plain ADD COLUMN `sqlite_definition`
    (type, NOT NULL, DEFAULT)."""

    def forwards(apps, schema_editor):
        model = apps.get_model("labeling", model_name)
        if schema_editor.connection.vendor == "sqlite":
            column = model._meta.get_field(name).column
            schema_editor.execute(
                f"ALTER TABLE {schema_editor.quote_name(model._meta.db_table)} "
                f"ADD COLUMN {schema_editor.quote_name(column)} {sqlite_definition}"
            )
        else:
            schema_editor.add_field(model, model._meta.get_field(name))

    def backwards(apps, schema_editor):
        model = apps.get_model("labeling", model_name)
        if schema_editor.connection.vendor == "sqlite":
            schema_editor.execute(
                f"ALTER TABLE {schema_editor.quote_name(model._meta.db_table)} "
                f"DROP COLUMN {schema_editor.quote_name(model._meta.get_field(name).column)}"
            )
        else:
            schema_editor.remove_field(model, model._meta.get_field(name))

    # The field enters the state first, so the RunPython after it sees it.
    return [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddField(model_name=model_name, name=name, field=field)],
        ),
        migrations.RunPython(forwards, backwards),
    ]
