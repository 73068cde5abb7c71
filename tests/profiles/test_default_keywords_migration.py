"""Existing installs get the refined default keyword set; edited sets are kept."""

import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from profiles import pyspy

MIGRATION = importlib.import_module("profiles.migrations.0003_engine_gpu_keywords")
BEFORE = [("profiles", "0002_capture_threads_file")]
AFTER = [("profiles", "0003_engine_gpu_keywords")]


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
            keyword_set=keyword_set, position=i, category=category, keyword=keyword
        )


def _pairs(apps, name):
    keyword_set = apps.get_model("profiles", "KeywordSet").objects.get(name=name)
    return [(k.category, k.keyword) for k in keyword_set.keywords.order_by("position")]


def test_the_migration_writes_exactly_the_engines_default_set():
    assert [(k.category, k.keyword) for k in pyspy.GPU_KEYWORDS] == MIGRATION.NEW


@pytest.fixture
def back_to_latest():
    """Later tests need every migration applied again, whatever this test left."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_an_untouched_default_set_is_refined_and_an_edited_one_is_kept(back_to_latest):
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
