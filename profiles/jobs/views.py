"""The group page: every process of a whole-job capture side by side, live until
every process ends (its JSON, `GET /api/groups/<id>/live/`, is in profiles.api), and
its downloads."""

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from config.params import query_ids
from profiles import pyspy
from profiles.captures import selectors
from profiles.jobs import selectors as group_selectors
from profiles.models import CaptureGroup
from profiles.storage import downloads
from runs.permissions import can_launch

EXPORTS = {
    "folded": ("text/plain", "folded.txt"),
    "speedscope": ("application/json", "speedscope.json"),
}


def _get_group_for_user(user, pk: int) -> CaptureGroup:
    # Every logged-in user may view every group (viewing is not restricted).
    return get_object_or_404(CaptureGroup.objects.select_related("run", "requested_by"), pk=pk)


@require_GET
def group_detail(request, pk: int):
    group = _get_group_for_user(request.user, pk)
    page = group_selectors.page_for_viewer(group, request.user, request.GET)
    context = {
        "group": group,
        "page": page,
        "can_launch": can_launch(request.user),
        "page_data": {**page, "liveUrl": f"/api/groups/{group.pk}/live/"},
    }
    return render(request, "profiles/group_detail.html", context)


@require_GET
def group_download(request, pk: int, what: str):
    """The whole job's merged flamegraph as folded stacks or one speedscope file: each
    process's stored tree under its label (`?capture=ID`… keeps those processes),
    written a process at a time."""
    group = _get_group_for_user(request.user, pk)
    if what not in EXPORTS:
        raise Http404("Export as folded or speedscope.")
    try:
        only = query_ids(request.GET, "capture")
    except ValidationError as exc:
        return HttpResponseBadRequest(" ".join(exc.messages))
    captures = [c for c in selectors.group_captures(group=group) if not only or c.pk in only]
    parts = selectors.group_trees(captures=captures, user=request.user)
    title = f"whole-job capture #{group.pk} of {group.run.name}"
    if what == "folded":
        # One chunk per process: a tree is at most FLAMEDECK_FLAMEGRAPH_NODES lines.
        body = (
            "".join(f"{x}\n" for x in pyspy.tree_to_folded(tree, label)) for label, tree in parts
        )
    else:
        body = pyspy.trees_to_speedscope(parts, title)
    content_type, suffix = EXPORTS[what]
    name = downloads.file_name(f"job-{group.pk}", group.run.name, suffix=suffix)
    return downloads.streamed(body, content_type, name)
