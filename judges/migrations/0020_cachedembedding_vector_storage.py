"""CachedEmbedding.vector stored uncompressed (PostgreSQL's STORAGE EXTERNAL).

A vector's float64 bytes (2 KB at 256 dimensions) are over the size at which PostgreSQL tries to compress a
value before storing it out of line, and random-looking numbers do not compress: every row paid for the
attempt. Only how new values are stored changes; SQLite has no such setting.
"""

from django.db import migrations


def storage(kind: str):
    def alter(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            table = schema_editor.quote_name(apps.get_model("judges", "CachedEmbedding")._meta.db_table)
            schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN vector SET STORAGE {kind}")

    return alter


class Migration(migrations.Migration):
    dependencies = [("judges", "0019_cachedembedding_vector_bytes")]

    operations = [migrations.RunPython(storage("EXTERNAL"), storage("EXTENDED"))]
