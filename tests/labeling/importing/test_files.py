"""Result files written whole or not at all (labeling.importing.files): the exports' files and the CI command's."""

import os
import stat
import sys

import pytest

from labeling.importing.files import write_whole
from tests.judges.gate.test_full_disk import _can_mount, on_a_full_disk

# An export of ~200 KB through the commands' writer, in a process of its own (the full disk is its namespace's).
EXPORT = (
    "import sys\n"
    "from django.core.management import CommandError\n"
    "from labeling.management.commands._files import write_output\n"
    "try:\n"
    "    write_output('result', ('row %d,' % i + 'x' * 100 + '\\r\\n' for i in range(2000)))\n"
    "except CommandError as exc:\n"
    "    print(exc, file=sys.stderr)\n"
    "    sys.exit(1)\n"
)


@pytest.mark.skipif(not _can_mount(), reason="needs unshare and a mount namespace (a real full disk)")
def test_an_export_on_a_full_disk_leaves_the_file_as_it_was_and_says_why(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "result").write_text("the earlier export\n")

    done, names, content = on_a_full_disk(folder, sys.executable, "-c", EXPORT)

    assert content == "the earlier export\n", len(content)
    assert done.returncode == 1
    assert done.stderr.strip() == "Cannot write result: No space left on device; nothing was written there."
    assert sorted(names) == ["filler", "result"]


def test_it_replaces_the_file_keeping_its_permissions(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old")
    path.chmod(0o640)

    assert write_whole(path, ["a,b\r\n", "c,d\r\n"]) == 2

    assert path.read_bytes() == b"a,b\r\nc,d\r\n"  # newline="": the rows' own line ends
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["out.csv"]


def test_a_new_file_gets_the_usual_permissions_not_the_temporary_files(tmp_path):
    umask = os.umask(0o022)
    try:
        write_whole(tmp_path / "new.json", [b"{}"], binary=True)
    finally:
        os.umask(umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_a_symlink_stays_one_and_what_it_names_is_replaced(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")

    write_whole(tmp_path / "link.json", ["new"])

    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"


def test_a_failure_midway_leaves_the_old_file_and_no_temporary_one(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old")

    def pieces():
        yield "half"
        raise RuntimeError("the query failed")

    with pytest.raises(RuntimeError):
        write_whole(path, pieces())
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["out.csv"]


def test_a_pipe_or_a_device_is_written_in_place(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_whole(fifo, ["through the pipe"])
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    write_whole("/dev/null", ["nothing"])  # never replaced by a regular file
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
