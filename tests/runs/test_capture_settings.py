"""One settings schema (runs/capture_settings.py): every place that takes or shows the
py-spy settings reads the table, so a setting added there and not taken somewhere (or
taken somewhere and not declared there) fails here, and so does a list of the settings
written out again in another module. `clean` is the one validator."""

import argparse
import io
import re
import tokenize
from dataclasses import fields
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import models
from drf_spectacular.generators import SchemaGenerator

from profiles.api.views import CaptureRequestSerializer, capture_json
from profiles.management.commands.capture import Command as CaptureCommand
from profiles.models import Capture
from runs import capture_fields, capture_serializers
from runs.capture_settings import BY_NAME, CONFLICTS, SETTINGS, describe, names
from runs.remote import RecordSettings, record_flags
from tests.runs.test_views import context_json

ROOT = Path(__file__).resolve().parents[2]
ALL = set(BY_NAME)


# --- every reader takes every setting ---------------------------------------------------


def test_the_capture_model_has_a_column_of_each_settings_type_default_and_help():
    for setting in SETTINGS:
        column = Capture._meta.get_field(setting.name)
        kind = models.BooleanField if setting.is_switch else models.PositiveIntegerField
        assert isinstance(column, kind), setting.name
        assert (column.default, column.help_text) == (setting.default, setting.help)


def test_the_seam_takes_every_record_setting_and_asks_py_spy_for_each_switch():
    taken = {f.name for f in fields(RecordSettings)} - {"format", "gpu"}  # not settings
    assert taken == {"duration_s" if n == "duration" else n for n in names("record")}
    everything_on = {s.name: True if s.is_switch else 5 for s in SETTINGS}
    flags = record_flags(RecordSettings.of(everything_on))
    switches = [s for s in SETTINGS if s.is_switch and "record" in s.kinds]
    assert all(s.flag in flags for s in switches)
    assert flags[flags.index("--rate") + 1] == "5"


def test_the_api_takes_every_setting_and_the_schema_describes_it(db):
    target = {"host", "pid", "process", "kind", "run"}
    assert set(CaptureRequestSerializer().fields) == ALL | target
    job = {"kind", "repeat", "interval"}  # a whole-job dump's (kind dump)
    assert set(capture_serializers.JobCaptureSettingsSerializer().fields) == ALL | job
    spec = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    for component, job in (("CaptureRequestRequest", False), ("JobCaptureSettingsRequest", True)):
        shown = spec[component]["properties"]
        for setting in SETTINGS:
            assert shown[setting.name]["description"] == setting.help
            assert shown[setting.name]["default"] == setting.default_for(job=job)
    assert set(spec["SettingsAnswer"]["properties"]) == ALL
    assert shown["duration"]["maximum"] == 600 and shown["rate"]["maximum"] == 2000


def test_a_capture_answers_with_every_setting(db):
    capture = Capture.objects.create(pid=5)
    assert set(capture_json(capture)["settings"]) == ALL


def test_the_capture_command_has_an_option_per_setting():
    parser = argparse.ArgumentParser()
    CaptureCommand().add_arguments(parser)
    options = {a.dest for a in parser._actions}
    assert options == ALL | {"help", "host", "pid", "kind", "run", "queue"}
    parsed = parser.parse_args(["--host", "h", "--pid", "1", "--no-native", "--dump-locals"])
    assert capture_fields.given_options(vars(parsed)) == {"native": False, "dump_locals": True}


def test_the_dialogs_get_every_setting_and_refused_pair(owner_client, db):
    from runs.models import Host, Run, RunProcess

    run = Run.objects.create(name="dialogs")
    RunProcess.objects.create(run=run, host=Host.objects.get(name="local"), pid=42)
    page = owner_client.get(f"/runs/{run.pk}/")
    schema = context_json(page, "launch-context")["schema"]
    assert [s["name"] for s in schema["settings"]] == [s.name for s in SETTINGS]
    assert schema["conflicts"][0]["settings"] == list(CONFLICTS[0].settings)
    assert set(context_json(page, "capture-all-data")["settings"]) == set(names("record"))
    assert describe(maximums={"FLAMEDECK_MAX_DURATION_S": 7})["settings"][0]["maximum"] == 7


# --- the one validator -----------------------------------------------------------------


def test_clean_fills_defaults_a_whole_job_capture_has_its_own():
    assert capture_fields.clean({})["idle"] is False
    assert capture_fields.clean({}, job=True)["idle"] is True
    assert capture_fields.clean({"idle": False}, job=True)["idle"] is False
    # A form body or a command line sends text: digits and true/false are read.
    cleaned = capture_fields.clean({"duration": "12", "gil": "true"})
    assert (cleaned["duration"], cleaned["gil"], cleaned["rate"]) == (12, True, 20)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"duration": 0}, "duration"),
        ({"duration": 601}, "duration"),
        ({"rate": 2001}, "rate"),
        ({"rate": "²"}, "rate"),
        ({"rate": True}, "rate"),
        ({"native": "yes please"}, "native"),
        ({"idle": 1}, "idle"),
        ({"native": True, "nonblocking": True}, "nonblocking"),
        ({"cpu": True}, "settings"),
    ],
)
def test_clean_refuses_naming_the_field(values, field):
    with pytest.raises(ValidationError) as refused:
        capture_fields.clean(values)
    assert field in refused.value.message_dict


def test_the_refused_pair_is_a_records_only():
    # py-spy dump takes no --nonblocking from flamedeck: a dump with both is fine.
    assert capture_fields.clean({"native": True, "nonblocking": True}, kind="dump")


def test_the_duration_cap_is_the_deployments(settings):
    settings.FLAMEDECK_MAX_DURATION_S = 20
    with pytest.raises(ValidationError):
        capture_fields.clean({"duration": 21})


# --- declared once -----------------------------------------------------------------------
# Each of these touches one setting by name for a reason of its own; anything else that
# names them (a list of settings, a form, a JS array) is a second declaration.
NAMED_FOR_A_REASON = {
    "profiles/models.py": "one column per setting (checked against the table above)",
    "runs/remote/model.py": "RecordSettings' fields (checked above)",
    "profiles/web/views.py": "a speedscope download of --subprocesses is refused when hidden",
    "profiles/captures/pipeline.py": "py-spy dump's --locals",
    "profiles/captures/record_notes.py": "a record whose py-spy crashed with --subprocesses "
    "is taken again without it",
}
DISTINCT = ("nonblocking", "subprocesses", "dump_locals")  # words nothing else uses
JS_NAME = re.compile(r"""["'`](%s)["'`]|\.(%s)\b|\b(%s)\s*:""" % (("|".join(DISTINCT),) * 3))


def python_mentions(path: Path) -> set[str]:
    """Setting names used as code (names, attributes, exact strings), not in prose."""
    found = set()
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        text = token.string.strip("\"'") if token.type == tokenize.STRING else token.string
        if token.type in (tokenize.NAME, tokenize.STRING) and text in DISTINCT:
            found.add(text)
    return found


def mentions(path: Path) -> set[str]:
    if path.suffix == ".py":
        return python_mentions(path)
    return {word for match in JS_NAME.finditer(path.read_text()) for word in match.groups() if word}


def declared_again() -> list[str]:
    patterns = ("runs/**/*.py", "profiles/**/*.py", "config/**/*.py", "static/js/*.js",
                "templates/**/*.html")  # fmt: skip
    code = [path for pattern in patterns for path in ROOT.glob(pattern)]
    wrong = []
    for path in sorted(code):
        name = str(path.relative_to(ROOT))
        if "migrations" in path.parts or name in NAMED_FOR_A_REASON:
            continue
        if name in ("runs/capture_settings.py",) or name.startswith("profiles/pyspy/"):
            continue  # the table itself; the engine reads py-spy's output, not settings
        wrong += [f"{name} names {word}" for word in sorted(mentions(path))]
    return wrong


def test_no_other_module_lists_the_settings_again():
    assert declared_again() == []


def test_the_guard_sees_python_and_js_lists_but_not_prose(tmp_path):
    py = tmp_path / "form.py"
    py.write_text(
        '"""Sample subprocesses too."""\nBOOLS = ("gil", "nonblocking")\nx.subprocesses\n'
    )
    js = tmp_path / "dialog.js"
    js.write_text('const BOOLS = ["gil", "nonblocking"];\n// subprocesses\nd.dump_locals;\n')
    assert python_mentions(py) == {"nonblocking", "subprocesses"}
    assert mentions(js) == {"nonblocking", "dump_locals"}


def _table_rows(path: Path) -> dict[str, list[str]]:
    """The four-column table rows of a Markdown page, by their first cell."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4:
            rows[cells[0]] = cells
    return rows


def test_the_user_guide_lists_every_setting_with_its_option_and_default():
    rows = _table_rows(ROOT / "docs" / "capture.md")
    for setting in SETTINGS:
        name, flag, default, _ = rows[setting.name]
        assert flag == f"`{setting.flag}`"
        shown = {True: "on", False: "off"}.get(setting.default, str(setting.default))
        assert default.startswith(shown), (name, default)
    assert set(rows) - {"setting"} == ALL
