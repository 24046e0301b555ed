import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evalhub", "0002_projects"),
        ("judges", "0023_unrecorded_calls"),
    ]

    operations = [
        migrations.CreateModel(
            name="VerdictExport",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("endpoint_env", models.CharField(max_length=100)),
                ("headers_env", models.CharField(blank=True, max_length=100)),
                ("enabled", models.BooleanField(default=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("project", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE,
                                                 related_name="verdict_export", to="evalhub.project")),
            ],
        ),
    ]
