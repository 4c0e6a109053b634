"""Atomic writes (mining/files/atomic.py): nothing left on a failure, normal permissions."""

import pytest

from mining.files import atomic


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic.atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("crash")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []
    atomic.write_text(target, "done")
    assert target.read_text() == "done"


def test_atomic_files_get_normal_permissions(tmp_path):
    import os
    import stat

    target = tmp_path / "perm.txt"
    atomic.write_text(target, "x")
    mode = stat.S_IMODE(os.stat(target).st_mode)
    assert mode & 0o044, oct(mode)  # readable by group/others (umask permitting), not mkstemp's 0600
