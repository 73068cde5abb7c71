"""Template pieces of the regression watches: the capture page's and the run page's
panels (self-contained, so those pages need one line each), and alert lines."""

from django import template

from profiles.watches import selectors as watch_selectors
from profiles.watches.messages import alert_line
from profiles.watches.models import Alert, NotifyTarget
from runs.permissions import can_launch

from ..pyspy.compare import row_label

register = template.Library()


@register.filter
def alert_text(alert: Alert) -> str:
    return alert_line(alert, alert.judgement.baseline_id if alert.judgement else None)


@register.filter
def row_name(key: str) -> str:
    kind, _, name = str(key).partition(":")
    return row_label({"kind": kind, "name": name})


@register.inclusion_tag("profiles/_capture_watch.html", takes_context=True)
def capture_watch_panel(context, capture):
    """This capture's verdicts, and (operators) "watch this rank with this capture as
    baseline" or "make it the baseline" of the rank's watch."""
    user = context["request"].user
    usable = capture.status == "done" and capture.kind != "dump" and capture.process_id
    return {
        "capture": capture,
        "judgements": watch_selectors.capture_judgements(capture),
        "rank_watches": watch_selectors.watches_of_rank(capture) if usable else [],
        "offer": bool(usable and can_launch(user)),
        "targets": NotifyTarget.objects.all() if usable else [],
        "csrf_token": context.get("csrf_token"),
        "request": context["request"],
    }


@register.inclusion_tag("profiles/_run_watch.html", takes_context=True)
def run_watch_panel(context, run, processes):
    """The run's ranks: each one's watch, or an offer to watch it with its latest capture."""
    return {
        "run": run,
        **watch_selectors.run_watch_panel(run.pk, list(processes)),
        "can_launch": can_launch(context["request"].user),
        "targets": NotifyTarget.objects.all(),
        "csrf_token": context.get("csrf_token"),
        "request": context["request"],
    }
