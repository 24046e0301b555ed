"""Database triggers that keep the labeling queue's stored state exact.

Why triggers and not services: labels and cases are written by the labeling services, but also by
imports, the ingest API, the admin and bulk writes (bulk_create, update()) that skip Python hooks.
The queue must stay right whoever writes, so the database itself keeps:
- Label.stale: the label's content_hash differs from its case's (the case changed under it);
- CaseTally: one row per (case, rubric), created with the case or the rubric, whose `labels` and
  `requested` follow every insert and delete of labels and label requests.
PostgreSQL (production, tests) and SQLite (the embedded default) each get their dialect.
"""

from django.db import migrations

POSTGRES_UP = r"""
CREATE FUNCTION labeling_label_set_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.stale := NEW.content_hash IS DISTINCT FROM (SELECT content_hash FROM labeling_case WHERE id = NEW.case_id);
  RETURN NEW;
END $$;
CREATE TRIGGER labeling_label_stale BEFORE INSERT OR UPDATE OF content_hash, case_id ON labeling_label
  FOR EACH ROW EXECUTE FUNCTION labeling_label_set_stale();

CREATE FUNCTION labeling_case_content_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE labeling_label SET stale = (content_hash <> NEW.content_hash)
   WHERE case_id = NEW.id AND stale <> (content_hash <> NEW.content_hash);
  RETURN NULL;
END $$;
CREATE TRIGGER labeling_case_content AFTER UPDATE OF content_hash ON labeling_case
  FOR EACH ROW WHEN (OLD.content_hash IS DISTINCT FROM NEW.content_hash)
  EXECUTE FUNCTION labeling_case_content_changed();

CREATE FUNCTION labeling_case_tally_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER labeling_case_tally AFTER INSERT ON labeling_case
  FOR EACH ROW EXECUTE FUNCTION labeling_case_tally_rows();

CREATE FUNCTION labeling_rubric_tally_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER labeling_rubric_tally AFTER INSERT ON labeling_rubric
  FOR EACH ROW EXECUTE FUNCTION labeling_rubric_tally_rows();

CREATE FUNCTION labeling_label_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
    SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 1, 0 FROM labeling_case c WHERE c.id = NEW.case_id
    ON CONFLICT (case_id, rubric_id) DO UPDATE SET labels = labeling_casetally.labels + 1;
  ELSE
    UPDATE labeling_casetally SET labels = GREATEST(labels - 1, 0)
     WHERE case_id = OLD.case_id AND rubric_id = OLD.rubric_id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER labeling_label_tally AFTER INSERT OR DELETE ON labeling_label
  FOR EACH ROW EXECUTE FUNCTION labeling_label_tally();

CREATE FUNCTION labeling_labelrequest_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
    SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 0, 1 FROM labeling_case c WHERE c.id = NEW.case_id
    ON CONFLICT (case_id, rubric_id) DO UPDATE SET requested = labeling_casetally.requested + 1;
  ELSE
    UPDATE labeling_casetally SET requested = GREATEST(requested - 1, 0)
     WHERE case_id = OLD.case_id AND rubric_id = OLD.rubric_id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER labeling_labelrequest_tally AFTER INSERT OR DELETE ON labeling_labelrequest
  FOR EACH ROW EXECUTE FUNCTION labeling_labelrequest_tally();
"""

POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS labeling_labelrequest_tally ON labeling_labelrequest;
DROP TRIGGER IF EXISTS labeling_label_tally ON labeling_label;
DROP TRIGGER IF EXISTS labeling_rubric_tally ON labeling_rubric;
DROP TRIGGER IF EXISTS labeling_case_tally ON labeling_case;
DROP TRIGGER IF EXISTS labeling_case_content ON labeling_case;
DROP TRIGGER IF EXISTS labeling_label_stale ON labeling_label;
DROP FUNCTION IF EXISTS labeling_labelrequest_tally, labeling_label_tally, labeling_rubric_tally_rows,
  labeling_case_tally_rows, labeling_case_content_changed, labeling_label_set_stale;
"""

# SQLite cannot change NEW in a BEFORE trigger, so the stale flag is set by an AFTER trigger; recursive
# triggers are off by default, so that UPDATE does not fire them again. "WHERE true" lets the parser
# tell INSERT ... SELECT from an upsert's ON CONFLICT.
SQLITE_UP = [
    """CREATE TRIGGER labeling_label_stale_ins AFTER INSERT ON labeling_label BEGIN
  UPDATE labeling_label SET stale = (content_hash IS NOT (SELECT content_hash FROM labeling_case WHERE id = NEW.case_id))
   WHERE id = NEW.id;
END""",
    """CREATE TRIGGER labeling_label_stale_upd AFTER UPDATE OF content_hash, case_id ON labeling_label BEGIN
  UPDATE labeling_label SET stale = (content_hash IS NOT (SELECT content_hash FROM labeling_case WHERE id = NEW.case_id))
   WHERE id = NEW.id;
END""",
    """CREATE TRIGGER labeling_case_content AFTER UPDATE OF content_hash ON labeling_case
  WHEN OLD.content_hash IS NOT NEW.content_hash BEGIN
  UPDATE labeling_label SET stale = (content_hash <> NEW.content_hash) WHERE case_id = NEW.id;
END""",
    """CREATE TRIGGER labeling_case_tally AFTER INSERT ON labeling_case BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT NEW.id, r.id, NEW.dataset_id, 0, 0 FROM labeling_rubric r WHERE true
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
END""",
    """CREATE TRIGGER labeling_rubric_tally AFTER INSERT ON labeling_rubric BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT c.id, NEW.id, c.dataset_id, 0, 0 FROM labeling_case c WHERE true
  ON CONFLICT (case_id, rubric_id) DO NOTHING;
END""",
    """CREATE TRIGGER labeling_label_tally_ins AFTER INSERT ON labeling_label BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 1, 0 FROM labeling_case c WHERE c.id = NEW.case_id
  ON CONFLICT (case_id, rubric_id) DO UPDATE SET labels = labels + 1;
END""",
    """CREATE TRIGGER labeling_label_tally_del AFTER DELETE ON labeling_label BEGIN
  UPDATE labeling_casetally SET labels = MAX(labels - 1, 0)
   WHERE case_id = OLD.case_id AND rubric_id = OLD.rubric_id;
END""",
    """CREATE TRIGGER labeling_labelrequest_tally_ins AFTER INSERT ON labeling_labelrequest BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 0, 1 FROM labeling_case c WHERE c.id = NEW.case_id
  ON CONFLICT (case_id, rubric_id) DO UPDATE SET requested = requested + 1;
END""",
    """CREATE TRIGGER labeling_labelrequest_tally_del AFTER DELETE ON labeling_labelrequest BEGIN
  UPDATE labeling_casetally SET requested = MAX(requested - 1, 0)
   WHERE case_id = OLD.case_id AND rubric_id = OLD.rubric_id;
END""",
]
SQLITE_TRIGGERS = [
    "labeling_label_stale_ins", "labeling_label_stale_upd", "labeling_case_content", "labeling_case_tally",
    "labeling_rubric_tally", "labeling_label_tally_ins", "labeling_label_tally_del",
    "labeling_labelrequest_tally_ins", "labeling_labelrequest_tally_del",
]

# Rows that existed before the triggers: one tally per (case, rubric), and every label's stale flag.
BACKFILL = [
    """INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
SELECT c.id, r.id, c.dataset_id,
  (SELECT COUNT(*) FROM labeling_label l WHERE l.case_id = c.id AND l.rubric_id = r.id),
  (SELECT COUNT(*) FROM labeling_labelrequest q WHERE q.case_id = c.id AND q.rubric_id = r.id)
FROM labeling_case c CROSS JOIN labeling_rubric r""",
    """UPDATE labeling_label SET stale = (content_hash <> (SELECT c.content_hash FROM labeling_case c
  WHERE c.id = labeling_label.case_id))""",
]


def forwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(POSTGRES_UP)
    elif vendor == "sqlite":
        for statement in SQLITE_UP:
            schema_editor.execute(statement)
    else:
        raise RuntimeError(f"evalhub's labeling triggers support PostgreSQL and SQLite, not {vendor}.")
    for statement in BACKFILL:
        schema_editor.execute(statement)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_DOWN)
    else:
        for name in SQLITE_TRIGGERS:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")
    schema_editor.execute("DELETE FROM labeling_casetally")


class Migration(migrations.Migration):
    dependencies = [("labeling", "0002_queue_state")]

    operations = [migrations.RunPython(forwards, backwards)]
