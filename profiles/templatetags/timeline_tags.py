"""The whole-job page's timeline needs each rank's own clock: when its first and last
samples were taken on its host (stats["time"], stored by the analysis), so a window
picked on the job's clock opens as the same seconds on each rank's capture page."""

from django import template

from profiles.models import CaptureGroup

register = template.Library()


@register.simple_tag
def rank_clocks(group: CaptureGroup) -> dict[str, list[float]]:
    """{capture id: [start, end]} on its host's clock, for the ranks that keep time; read
    from the stored stats without loading them whole."""
    rows = group.captures.filter(stats__time__available=True).values_list(
        "pk", "stats__time__start", "stats__time__end"
    )
    return {str(pk): [start, end] for pk, start, end in rows}
