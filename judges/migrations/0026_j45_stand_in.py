from django.db import migrations, models


class Migration(migrations.Migration):
    """Judgment.stand_in: the verdict rests on an answer the scripted stand-in marked as its own. Judgments made
    before are left unmarked: their answers' origin was never recorded, and a name is no evidence of it."""

    dependencies = [
        ("judges", "0025_monitoring"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgment",
            name="stand_in",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddIndex(
            model_name="judgment",
            index=models.Index(condition=models.Q(stand_in=True), fields=["run"], name="judgment_stand_in"),
        ),
    ]
