"""The group page: every process of a whole-job capture side by side."""

from django.shortcuts import get_object_or_404, render

from runs.permissions import can_launch

from . import jobs, selectors
from .models import CaptureGroup


def _get_group_for_user(user, pk: int) -> CaptureGroup:
    # Every logged-in user may view every group (viewing is not restricted).
    return get_object_or_404(CaptureGroup.objects.select_related("run"), pk=pk)


def group_detail(request, pk: int):
    group = _get_group_for_user(request.user, pk)
    captures = selectors.group_captures(group=group)
    rows = selectors.group_rows(captures=captures)
    categories = sorted(
        {c["category"] for cap in captures for c in (cap.stats or {}).get("categories", [])}
    )
    context = {
        "group": group,
        "rows": rows,
        "categories": categories,
        "summary": jobs.group_summary(group),
        "can_launch": can_launch(request.user),
        "page_data": {
            "group": group.pk,
            "processes": [
                {"id": c.pk, "label": c.target_label, "gpu": c.gpu_samples} for c in captures
            ],
        },
    }
    return render(request, "profiles/group_detail.html", context)
