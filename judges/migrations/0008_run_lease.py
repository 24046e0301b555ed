from django.db import migrations, models


class Migration(migrations.Migration):
    """Runs at full speed: the lease moves from the chunk to the run; the start form's token."""

    dependencies = [
        ("judges", "0007_drift_checks"),
    ]

    operations = [
        migrations.RemoveField(model_name="runchunk", name="claimed_until"),
        migrations.AddField(
            model_name="run", name="lease_token", field=models.CharField(blank=True, default="", max_length=32),
        ),
        migrations.AddField(model_name="run", name="lease_until", field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(
            model_name="run", name="start_token", field=models.UUIDField(blank=True, null=True, unique=True),
        ),
    ]
