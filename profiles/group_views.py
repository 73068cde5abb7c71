"""The group page: every process of a whole-job capture side by side, live until
every process ends, and its JSON (`GET /api/groups/<id>/live/`)."""

from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET
from rest_framework.response import Response

from runs.api import api
from runs.permissions import can_launch

from . import api_schema, group_selectors
from .models import CaptureGroup


def _get_group_for_user(user, pk: int) -> CaptureGroup:
    # Every logged-in user may view every group (viewing is not restricted).
    return get_object_or_404(CaptureGroup.objects.select_related("run", "requested_by"), pk=pk)


@require_GET
def group_detail(request, pk: int):
    group = _get_group_for_user(request.user, pk)
    page = group_selectors.group_page(group)
    context = {
        "group": group,
        "page": page,
        "can_launch": can_launch(request.user),
        "page_data": {**page, "liveUrl": f"/api/groups/{group.pk}/live/"},
    }
    return render(request, "profiles/group_detail.html", context)


@api_schema.group_live
@api(["GET"])
def group_live(request, pk: int):
    """The group page's numbers; the page polls it until every process has ended."""
    return Response(group_selectors.group_page(_get_group_for_user(request.user, pk)))
