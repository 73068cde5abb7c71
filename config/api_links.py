"""The OpenAPI `links` of the schema: how one answer's values feed the next request,
as a launcher or a bot goes through a whole-job capture. Stateful testers
(Schemathesis' stateful phase) follow them; readers of /api/docs/ see them under each
answer. config.api_schema.finish writes them into the schema.

The flow: create a run (or a host), a rank registers itself (or is attached), capture
the whole job, read the group, compare it with another.
"""

from typing import Any

# (operation id, status) -> {link name: (target operation id, parameters, request body,
# description)}: parameters by `location.name`, values runtime expressions.
ITS_ID = {"path.id": "$response.body#/id"}
LINKS: dict[tuple[str, str], dict[str, tuple[str, dict[str, str], dict[str, str], str]]] = {
    ("hosts_create", "201"): {
        "Register": ("register_create", {}, {"host": "$response.body#/name"},
                     "A rank on this host attaches itself to a run."),
    },
    ("runs_create", "201"): {
        "Register": ("register_create", {}, {"run": "$response.body#/name"},
                     "A rank attaches itself to this run, by its name."),
        "Attach": ("runs_processes_create", ITS_ID, {}, "Attach a process to this run."),
        "CaptureAll": ("runs_capture_create", ITS_ID, {}, "Capture every rank of this run."),
        "Run": ("runs_retrieve", ITS_ID, {}, "The run with its processes."),
    },
    **{
        ("register_create", status): {
            "CaptureAll": ("runs_capture_create", {"path.id": "$response.body#/run/id"}, {},
                           "Capture every rank of the run it joined."),
            "Run": ("runs_retrieve", {"path.id": "$response.body#/run/id"}, {},
                    "The run it joined, with its processes."),
        }
        for status in ("200", "201")
    },
    **{
        ("runs_processes_create", status): {
            "CaptureAll": ("runs_capture_create", {"path.id": "$request.path.id"}, {},
                           "Capture every rank of the run."),
            "Detach": ("runs_processes_destroy",
                       {"path.id": "$request.path.id", "path.process_pk": "$response.body#/id"},
                       {}, "Detach the process again."),
        }
        for status in ("200", "201")
    },
    ("runs_capture_create", "201"): {
        "Group": ("groups_retrieve", ITS_ID, {}, "The whole-job capture: status, then report."),
        "Live": ("groups_live_retrieve", ITS_ID, {}, "Its page's live numbers."),
        "Timeline": ("groups_timeline_retrieve", ITS_ID, {}, "Its ranks on one clock."),
        "Flamegraph": ("groups_flamegraph_retrieve", ITS_ID, {}, "Its merged flamegraph."),
        "CompareWith": ("compare_groups_retrieve", {"query.b": "$response.body#/id"}, {},
                        "Compare an earlier whole-job capture (`a`) with this one."),
    },
    **{
        (source, "201"): {
            "Capture": ("captures_retrieve", ITS_ID, {}, "Its status, progress, then stats."),
            "Flamegraph": ("captures_flamegraph_retrieve", ITS_ID, {}, "Its flamegraph."),
            "Timeline": ("captures_timeline_retrieve", ITS_ID, {}, "Its threads' states in time."),
            "Window": ("captures_window_retrieve", ITS_ID, {}, "A window of it."),
            "Sandwich": ("captures_sandwich_retrieve", ITS_ID, {}, "A frame's callers, callees."),
            "Cancel": ("captures_cancel_create", ITS_ID, {}, "Stop it."),
        }
        for source in ("captures_create", "captures_import_create")
    },
    ("watches_create", "201"): {
        "Watch": ("watches_retrieve", ITS_ID, {}, "The watch with its alerts."),
        "Change": ("watches_partial_update", ITS_ID, {}, "Change, snooze or acknowledge."),
        "Delete": ("watches_destroy", ITS_ID, {}, "Stop watching."),
    },
    ("groups_retrieve", "200"): {
        "Compare": ("compare_groups_retrieve", {"query.a": "$response.body#/id"}, {},
                    "Compare this whole-job capture with a later one (`b`)."),
        "CaptureAgain": ("runs_capture_create", {"path.id": "$response.body#/run"}, {},
                         "Capture the same run again (then compare the two)."),
    },
}  # fmt: skip


def add_links(paths: dict[str, Any]) -> None:
    """Write LINKS into the answers of `paths` (the schema's); a link whose operation
    or answer is missing fails loudly (the table went stale)."""
    answers = {
        (operation["operationId"], status): answer
        for operations in paths.values()
        for operation in operations.values()
        for status, answer in operation.get("responses", {}).items()
    }
    known = {operation_id for operation_id, _ in answers}
    for key, links in LINKS.items():
        if key not in answers:
            raise KeyError(f"config.api_links: no answer {key} in the schema")
        written = answers[key].setdefault("links", {})
        for name, (target, parameters, body, description) in links.items():
            if target not in known:
                raise KeyError(f"config.api_links: no operation {target}")
            link: dict[str, Any] = {"operationId": target, "description": description}
            if parameters:
                link["parameters"] = parameters
            if body:
                link["requestBody"] = body
            written[name] = link
