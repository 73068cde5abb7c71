"""The engine's version (version.py): the project's version, written into exported files."""

import importlib.metadata
import tomllib
from pathlib import Path

import profiles.pyspy
from profiles.pyspy.formats.export import to_speedscope
from profiles.pyspy.formats.raw import parse_raw_lines
from profiles.pyspy.version import __version__

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def test_pyproject_takes_its_version_from_here():
    project = tomllib.loads(PYPROJECT.read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "profiles.pyspy.version.__version__"
    }


def test_it_is_the_installed_package_metadata_version():
    assert __version__ == importlib.metadata.version("flamedeck")


def test_the_package_exports_it_and_exported_files_name_it():
    assert profiles.pyspy.__version__ == __version__
    exported = to_speedscope(parse_raw_lines(["main (train.py:1) 3"]), "capture")
    assert exported["exporter"] == f"flamedeck@{__version__}"
