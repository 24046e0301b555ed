from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("judges", "0012_audit_samples"),
    ]

    operations = [
        migrations.AddField(
            model_name="ciresult",
            name="cases",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
