"""CachedEmbedding.vector: a JSON list of numbers becomes the same numbers as little-endian float64 bytes.

Every stored vector is converted, so entries cached before stay readable (and are not embedded again); an
entry that is not a list of finite numbers was a miss to the engine already and is dropped.
"""

import math

from django.db import migrations, models

BATCH = 2000


def _bytes(vector) -> bytes | None:
    import numpy as np

    try:
        array = np.asarray(vector, dtype="<f8")
    except (TypeError, ValueError):
        return None
    if array.ndim != 1 or not array.size or not all(math.isfinite(x) for x in array.tolist()):
        return None
    return array.tobytes()


def to_bytes(apps, schema_editor):
    CachedEmbedding = apps.get_model("judges", "CachedEmbedding")
    last, damaged = 0, []
    while batch := list(CachedEmbedding.objects.filter(pk__gt=last).order_by("pk")[:BATCH]):
        for entry in batch:
            entry.vector_bytes = _bytes(entry.vector)
            if entry.vector_bytes is None:
                damaged.append(entry.pk)
        CachedEmbedding.objects.bulk_update([e for e in batch if e.vector_bytes is not None], ["vector_bytes"])
        last = batch[-1].pk
    CachedEmbedding.objects.filter(pk__in=damaged).delete()


def to_lists(apps, schema_editor):
    import numpy as np

    CachedEmbedding = apps.get_model("judges", "CachedEmbedding")
    last = 0
    while batch := list(CachedEmbedding.objects.filter(pk__gt=last).order_by("pk")[:BATCH]):
        for entry in batch:
            entry.vector = np.frombuffer(bytes(entry.vector_bytes), dtype="<f8").tolist()
        CachedEmbedding.objects.bulk_update(batch, ["vector"])
        last = batch[-1].pk


class Migration(migrations.Migration):

    dependencies = [
        ("judges", "0018_judge_proposals"),
    ]

    operations = [
        migrations.AddField(
            model_name="cachedembedding", name="vector_bytes", field=models.BinaryField(null=True),
        ),
        migrations.AlterField(model_name="cachedembedding", name="vector", field=models.JSONField(null=True)),
        migrations.RunPython(to_bytes, to_lists),
        migrations.RemoveField(model_name="cachedembedding", name="vector"),
        migrations.RenameField(model_name="cachedembedding", old_name="vector_bytes", new_name="vector"),
        migrations.AlterField(model_name="cachedembedding", name="vector", field=models.BinaryField()),
    ]
