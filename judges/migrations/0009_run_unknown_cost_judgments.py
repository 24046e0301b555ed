from django.db import migrations, models
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce

# An imported (external) judgment has no cost because evalhub made no call for it, not because a price is missing.
EXTERNAL = "external"


def count_unpriced(apps, schema_editor):
    """A judgment whose cost is null made a call of unknown cost (a model with no price, or no usage
    reported; a cached or call-free one costs 0): count them on their run, so an unpriced run reads
    "unknown" instead of the $0 it stored."""
    Run = apps.get_model("judges", "Run")
    Judgment = apps.get_model("judges", "Judgment")
    unpriced = (
        Judgment.objects.filter(run=OuterRef("pk"), cost_usd__isnull=True)
        .filter(~Q(layer=EXTERNAL))
        .order_by()
        .values("run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    Run.objects.update(unknown_cost_judgments=Coalesce(Subquery(unpriced, output_field=IntegerField()), 0))


class Migration(migrations.Migration):
    """A run's cost may be unknown in part: the judgments with a call of unknown cost are counted."""

    dependencies = [
        ("judges", "0008_run_lease"),
    ]

    operations = [
        migrations.AddField(
            model_name="run", name="unknown_cost_judgments", field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(count_unpriced, migrations.RunPython.noop),
    ]
