"""Datasets, rubrics and policy documents belong to a project (docs/projects.md); a slug is unique within its
project. A single-team install's data migrates into one project (EVALHUB_DEFAULT_PROJECT, default "default"):
its datasets, rubrics, policy documents and API tokens, and each user's global role becomes a membership of it.

The queue's tally triggers (0003_queue_triggers) pair a new case with its own project's rubrics only, and a new
rubric with its own project's cases. On SQLite, altering the rubric table rebuilds it, which drops its triggers
(and triggers naming it break the rebuild), so there every trigger is set aside first and created again after.

Reversible while the instance holds one project.
"""

import django.db.models.deletion
from django.db import migrations, models

from evalhub.migrations._one_project import refuse_with_several_projects, the_one_project

POSTGRES_TALLY = {
    "labeling_case_tally_rows": (
        "SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r"
        " WHERE r.project_id = (SELECT d.project_id FROM labeling_dataset d WHERE d.id = NEW.dataset_id)",
        "SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r",
    ),
    "labeling_rubric_tally_rows": (
        "SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c"
        " JOIN labeling_dataset d ON d.id = c.dataset_id WHERE d.project_id = NEW.project_id",
        "SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c",
    ),
}

POSTGRES_FUNCTION = """CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  {select}
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
  RETURN NULL;
END $$;"""

SQLITE_TALLY = {
    "labeling_case_tally": (
        "AFTER INSERT ON labeling_case",
        "SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r"
        " WHERE r.project_id = (SELECT d.project_id FROM labeling_dataset d WHERE d.id = NEW.dataset_id)",
        "SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r WHERE true",
    ),
    "labeling_rubric_tally": (
        "AFTER INSERT ON labeling_rubric",
        "SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c"
        " JOIN labeling_dataset d ON d.id = c.dataset_id WHERE d.project_id = NEW.project_id",
        "SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c WHERE true",
    ),
}

SQLITE_TRIGGER = """CREATE TRIGGER {name} {when} BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  {select}
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
END"""

# The SQLite triggers set aside while the tables are rebuilt, by name: one migrate runs in one process.
_set_aside: dict[str, str] = {}


def _triggers_aside(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql IS NOT NULL ORDER BY name")
        triggers = cursor.fetchall()
    for name, sql in triggers:
        _set_aside[name] = sql
        schema_editor.execute(f"DROP TRIGGER {schema_editor.quote_name(name)}")


def _triggers_back(schema_editor, *, per_project: bool) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name, (new, old) in POSTGRES_TALLY.items():
            schema_editor.execute(POSTGRES_FUNCTION.format(name=name, select=new if per_project else old))
        return
    if vendor != "sqlite":
        return
    for name, sql in sorted(_set_aside.items()):
        if name in SQLITE_TALLY:
            when, new, old = SQLITE_TALLY[name]
            sql = SQLITE_TRIGGER.format(name=name, when=when, select=new if per_project else old)
        schema_editor.execute(sql)
    _set_aside.clear()


def per_project_triggers(apps, schema_editor) -> None:
    _triggers_back(schema_editor, per_project=True)


def instance_wide_triggers(apps, schema_editor) -> None:
    _triggers_back(schema_editor, per_project=False)


def into_one_project(apps, schema_editor) -> None:
    """The existing data, tokens and roles become one project's; a new install (nothing yet) gets no project."""
    models_to_bind = [apps.get_model("labeling", name) for name in ("Dataset", "Rubric", "PolicyDocument")]
    tokens = apps.get_model("evalhub", "ApiToken").objects.all()
    users = apps.get_model("evalhub", "User").objects.filter(is_superuser=False)
    if not any(model.objects.exists() for model in models_to_bind) and not tokens.exists() and not users.exists():
        return
    project = the_one_project(apps)
    for model in models_to_bind:
        model.objects.update(project=project)
    tokens.update(project=project)
    membership = apps.get_model("evalhub", "Membership")
    membership.objects.bulk_create(
        [membership(project=project, user_id=pk, role="lead" if role in {"lead", "admin"} else "reviewer")
         for pk, role in users.values_list("pk", "role")],
        ignore_conflicts=True,
    )


def out_of_one_project(apps, schema_editor) -> None:
    refuse_with_several_projects(apps)


def _project_field(related_name: str, *, null: bool) -> models.ForeignKey:
    return models.ForeignKey(null=null, on_delete=django.db.models.deletion.PROTECT, related_name=related_name,
                             to='evalhub.project')


class Migration(migrations.Migration):

    dependencies = [
        ('evalhub', '0002_projects'),
        ('labeling', '0017_dataset_policies'),
    ]

    operations = [
        migrations.RunPython(_triggers_aside, instance_wide_triggers),
        migrations.AddField(model_name='dataset', name='project', field=_project_field('datasets', null=True)),
        migrations.AddField(model_name='rubric', name='project', field=_project_field('rubrics', null=True)),
        migrations.AddField(model_name='policydocument', name='project', field=_project_field('policies', null=True)),
        migrations.RunPython(into_one_project, out_of_one_project),
        migrations.AlterField(model_name='dataset', name='project', field=_project_field('datasets', null=False)),
        migrations.AlterField(model_name='rubric', name='project', field=_project_field('rubrics', null=False)),
        migrations.AlterField(model_name='policydocument', name='project',
                              field=_project_field('policies', null=False)),
        migrations.AlterField(model_name='dataset', name='slug', field=models.SlugField(max_length=100)),
        migrations.AlterField(model_name='rubric', name='slug', field=models.SlugField(max_length=100)),
        migrations.RemoveConstraint(model_name='policydocument', name='policydocument_unique_version'),
        migrations.AddConstraint(
            model_name='dataset',
            constraint=models.UniqueConstraint(fields=('project', 'slug'), name='dataset_unique_slug_in_project'),
        ),
        migrations.AddConstraint(
            model_name='rubric',
            constraint=models.UniqueConstraint(fields=('project', 'slug'), name='rubric_unique_slug_in_project'),
        ),
        migrations.AddConstraint(
            model_name='policydocument',
            constraint=models.UniqueConstraint(fields=('project', 'slug', 'version'),
                                               name='policydocument_unique_version'),
        ),
        migrations.RunPython(per_project_triggers, _triggers_aside),
    ]
