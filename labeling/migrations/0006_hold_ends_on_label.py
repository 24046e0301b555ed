"""A label ends its reviewer's hold on the case: the label trigger clears the claim in the same UPDATE.

Without it the queue would have to ask, for every held case it passes, whether the holder has answered
(a subquery PostgreSQL may run as a scan of all labels). Now a claim in CaseTally always means "shown to
that reviewer, not answered yet".
"""

from django.db import migrations

POSTGRES_UP = r"""
CREATE OR REPLACE FUNCTION labeling_label_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
    SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 1, 0 FROM labeling_case c WHERE c.id = NEW.case_id
    ON CONFLICT (case_id, rubric_id) DO UPDATE SET
      labels = labeling_casetally.labels + 1,
      claimed_by_id = CASE WHEN labeling_casetally.claimed_by_id = NEW.reviewer_id THEN NULL
                           ELSE labeling_casetally.claimed_by_id END,
      claimed_until = CASE WHEN labeling_casetally.claimed_by_id = NEW.reviewer_id THEN NULL
                           ELSE labeling_casetally.claimed_until END;
  ELSE
    UPDATE labeling_casetally SET labels = GREATEST(labels - 1, 0)
     WHERE case_id = OLD.case_id AND rubric_id = OLD.rubric_id;
  END IF;
  RETURN NULL;
END $$;
"""

SQLITE_UP = [
    "DROP TRIGGER IF EXISTS labeling_label_tally_ins",
    """CREATE TRIGGER labeling_label_tally_ins AFTER INSERT ON labeling_label BEGIN
  INSERT INTO labeling_casetally (case_id, rubric_id, dataset_id, labels, requested)
  SELECT NEW.case_id, NEW.rubric_id, c.dataset_id, 1, 0 FROM labeling_case c WHERE c.id = NEW.case_id
  ON CONFLICT (case_id, rubric_id) DO UPDATE SET
    labels = labels + 1,
    claimed_by_id = CASE WHEN claimed_by_id = NEW.reviewer_id THEN NULL ELSE claimed_by_id END,
    claimed_until = CASE WHEN claimed_by_id = NEW.reviewer_id THEN NULL ELSE claimed_until END;
END""",
]


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_UP)
    else:
        for statement in SQLITE_UP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("labeling", "0005_rubric_max_probe_moved")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
