"""Projects (docs/projects.md): the unit above datasets. Users get a role per project (Membership) instead of
the global User.role, which migration 0003 removes once labeling 0018 has turned those roles into memberships
of the one project a single-team install migrates into."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('evalhub', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='Project',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(max_length=100, unique=True)),
                ('name', models.CharField(max_length=200)),
                ('description', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={'ordering': ['slug']},
        ),
        migrations.CreateModel(
            name='Membership',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('role', models.CharField(choices=[('reviewer', 'Reviewer'), ('lead', 'Lead')], max_length=16)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='evalhub.project')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['project', 'user__username'],
                'indexes': [models.Index(fields=['project', 'role'], name='membership_project_role')],
                'constraints': [models.UniqueConstraint(fields=('user', 'project'), name='membership_one_per_project')],
            },
        ),
        migrations.CreateModel(
            name='MemberEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('added', 'added'), ('invited', 'invited'), ('joined', 'joined by invitation'), ('invitation_withdrawn', 'invitation withdrawn'), ('role_changed', 'role changed'), ('removed', 'removed'), ('assignments_set', 'datasets assigned'), ('token_created', 'API token created'), ('token_revoked', 'API token revoked')], max_length=24)),
                ('subject', models.CharField(max_length=254)),
                ('detail', models.TextField(blank=True)),
                ('at', models.DateTimeField(default=django.utils.timezone.now)),
                ('by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='member_events', to='evalhub.project')),
            ],
            options={
                'ordering': ['-at', '-pk'],
                'indexes': [models.Index(fields=['project', '-at'], name='memberevent_project_recent')],
            },
        ),
        migrations.CreateModel(
            name='Invitation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('invitee', models.CharField(max_length=254)),
                ('role', models.CharField(choices=[('reviewer', 'Reviewer'), ('lead', 'Lead')], max_length=16)),
                ('token_hash', models.CharField(editable=False, max_length=64, unique=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('expires_at', models.DateTimeField()),
                ('accepted_at', models.DateTimeField(blank=True, null=True)),
                ('withdrawn_at', models.DateTimeField(blank=True, null=True)),
                ('accepted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('created_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='evalhub.project')),
            ],
            options={'ordering': ['-created_at']},
        ),
        # Nullable until labeling 0018 has bound every token to the one project; 0003 makes it required.
        migrations.AddField(
            model_name='apitoken',
            name='project',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='tokens', to='evalhub.project'),
        ),
    ]
