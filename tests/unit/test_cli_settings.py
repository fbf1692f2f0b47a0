"""Operator commands find their database: the environment first, else the system `make run` is running."""

from __future__ import annotations

import json

from memento_shared.settings import cli_settings


def test_environment_wins(monkeypatch, tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"database_url": "postgresql://run/x", "redis_url": "redis://run"}))
    monkeypatch.setenv("MEMENTO_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", "postgresql://env/x")
    assert cli_settings().database_url == "postgresql://env/x"


def test_running_system_is_found_through_the_data_dir(monkeypatch, tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"database_url": "postgresql://run/x", "redis_url": "redis://run"}))
    monkeypatch.setenv("MEMENTO_DATA_DIR", str(tmp_path))
    settings = cli_settings()
    assert (settings.database_url, settings.redis_url) == ("postgresql://run/x", "redis://run")


def test_nothing_running_falls_back_to_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMENTO_DATA_DIR", str(tmp_path))
    assert cli_settings().database_url.startswith("postgresql://memento_app@localhost:5432/")
