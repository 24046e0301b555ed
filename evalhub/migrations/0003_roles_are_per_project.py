"""The global User.role gives way to the memberships labeling 0018 made of it; every token now has a project."""

import django.db.models.deletion
from django.db import migrations, models


def roles_back(apps, schema_editor) -> None:
    """Backwards: each user's role in the one project becomes their global role again."""
    from evalhub.migrations._one_project import refuse_with_several_projects

    refuse_with_several_projects(apps)
    user_model = apps.get_model("evalhub", "User")
    for membership in apps.get_model("evalhub", "Membership").objects.all():
        user_model.objects.filter(pk=membership.user_id).update(role=membership.role)
    user_model.objects.filter(is_superuser=True).update(role="admin")


class Migration(migrations.Migration):

    dependencies = [
        ('evalhub', '0002_projects'),
        ('labeling', '0018_projects'),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, roles_back),
        migrations.RemoveField(model_name='user', name='role'),
        migrations.AlterField(
            model_name='apitoken',
            name='project',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='tokens', to='evalhub.project'),
        ),
    ]
