"""The judgment and embedding caches are kept per project (docs/projects.md): a hit never tells one project what
another's judge said. A single-team install's entries become its one project's."""

import django.db.models.deletion
from django.db import migrations, models

from evalhub.migrations._one_project import refuse_with_several_projects, the_one_project


def into_one_project(apps, schema_editor) -> None:
    cached = [apps.get_model("judges", name) for name in ("CachedJudgment", "CachedEmbedding")]
    if not any(model.objects.exists() for model in cached):
        return
    project = the_one_project(apps)
    for model in cached:
        model.objects.update(project=project)


def out_of_one_project(apps, schema_editor) -> None:
    refuse_with_several_projects(apps)


def _project_field(*, null: bool) -> models.ForeignKey:
    return models.ForeignKey(db_index=False, null=null, on_delete=django.db.models.deletion.CASCADE,
                             related_name='+', to='evalhub.project')


class Migration(migrations.Migration):

    dependencies = [
        ('evalhub', '0002_projects'),
        ('labeling', '0018_projects'),
        ('judges', '0021_fewer_indexes'),
    ]

    operations = [
        migrations.AddField(model_name='cachedjudgment', name='project', field=_project_field(null=True)),
        migrations.AddField(model_name='cachedembedding', name='project', field=_project_field(null=True)),
        migrations.RunPython(into_one_project, out_of_one_project),
        migrations.AlterField(model_name='cachedjudgment', name='project', field=_project_field(null=False)),
        migrations.AlterField(model_name='cachedembedding', name='project', field=_project_field(null=False)),
        # The unique index becomes (project, key): added before the key-only one goes, so a key always has one.
        migrations.AddConstraint(
            model_name='cachedjudgment',
            constraint=models.UniqueConstraint(fields=('project', 'key'), name='cachedjudgment_unique_project_key'),
        ),
        migrations.AddConstraint(
            model_name='cachedembedding',
            constraint=models.UniqueConstraint(fields=('project', 'key'), name='cachedembedding_unique_project_key'),
        ),
        migrations.RemoveConstraint(model_name='cachedjudgment', name='cachedjudgment_unique_key'),
        migrations.RemoveConstraint(model_name='cachedembedding', name='cachedembedding_unique_key'),
    ]
