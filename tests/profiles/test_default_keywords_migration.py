"""Existing installs get each refined default keyword set; edited sets are kept."""

import importlib
from pathlib import Path

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from profiles import pyspy

MIGRATIONS = Path(__file__).resolve().parents[2] / "profiles" / "migrations"


def _module(suffix):
    """A migration by its descriptive name (numbers change when branches merge)."""
    (path,) = MIGRATIONS.glob(f"[0-9][0-9][0-9][0-9]_{suffix}.py")
    return importlib.import_module(f"profiles.migrations.{path.stem}")


KEYWORD_MIGRATIONS = [_module("engine_gpu_keywords"), _module("states_gpu_keywords")]
LATEST = KEYWORD_MIGRATIONS[-1]


def _migrate(target):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _make_set(apps, name, pairs):
    keyword_set = apps.get_model("profiles", "KeywordSet").objects.create(name=name)
    Keyword = apps.get_model("profiles", "Keyword")
    for i, (category, keyword) in enumerate(pairs):
        Keyword.objects.create(
            keyword_set_id=keyword_set.pk, position=i, category=category, keyword=keyword
        )


def _pairs(apps, name):
    keyword_set = apps.get_model("profiles", "KeywordSet").objects.get(name=name)
    rows = apps.get_model("profiles", "Keyword").objects.filter(keyword_set_id=keyword_set.pk)
    return [(k.category, k.keyword) for k in rows.order_by("position")]


def test_the_latest_migration_writes_exactly_the_engines_default_set():
    assert [(k.category, k.keyword) for k in pyspy.GPU_KEYWORDS] == LATEST.NEW


def test_each_keyword_migration_starts_from_the_set_the_previous_one_wrote():
    for earlier, later in zip(KEYWORD_MIGRATIONS, KEYWORD_MIGRATIONS[1:], strict=False):
        assert later.OLD == earlier.NEW


@pytest.mark.parametrize("MIGRATION", KEYWORD_MIGRATIONS, ids=lambda m: m.__name__)
@pytest.mark.django_db(transaction=True)
def test_an_untouched_default_set_is_refined_and_an_edited_one_is_kept(back_to_latest, MIGRATION):
    BEFORE = MIGRATION.Migration.dependencies
    AFTER = [("profiles", MIGRATION.__name__.rpartition(".")[2])]
    apps = _migrate(BEFORE)
    apps.get_model("profiles", "KeywordSet").objects.all().delete()
    _make_set(apps, MIGRATION.SET_NAME, MIGRATION.OLD)
    apps = _migrate(AFTER)
    assert _pairs(apps, MIGRATION.SET_NAME) == MIGRATION.NEW
    apps = _migrate(BEFORE)
    assert _pairs(apps, MIGRATION.SET_NAME) == MIGRATION.OLD
    edited = [*MIGRATION.OLD, ("io", "read")]
    apps.get_model("profiles", "KeywordSet").objects.all().delete()
    _make_set(apps, MIGRATION.SET_NAME, edited)
    apps = _migrate(AFTER)
    assert _pairs(apps, MIGRATION.SET_NAME) == edited
