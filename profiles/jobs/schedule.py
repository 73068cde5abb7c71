"""When a whole-job capture or dump samples: one instant a little ahead of the request.

Every host of a group is given the same instant (`CaptureGroup.start_by`): far enough
ahead that the slowest host's session is up and its py-spy attached by then, learned
from the last whole-job captures of those hosts (each rank keeps, in `progress.lead_s`,
how long after its request it could sample), and no further, since the instant is
what the user waits for. Hosts never seen in a whole-job capture get a first guess
that grows with their number (a worker opens one ssh session per host at once).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db.models import FloatField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from profiles.models import Capture

MIN_LEAD_S = 1.0
"""Never closer than this: a session to a quiet host and a py-spy attach take about 0.3
to 1 s here (a `--native` attach to a busy torch rank more: learned)."""
LEARNED_MARGIN = 1.25
LEARNED_PAD_S = 0.5
"""The instant lies this far past the slowest lead learned: 25% and half a second
over it, for a busier moment than the last capture's."""
FIRST_LEAD_S = 1.5
FIRST_LEAD_PER_HOST_S = 0.04
"""Hosts with no history: 1.5 s, plus 40 ms a host for the ssh sessions the workers
open at once (128 hosts: 6.6 s)."""
HISTORY = 4
"""Learn from the ranks of the last few captures of each host."""
RECORD_KEY, DUMP_KEY = "lead_s", "dump_lead_s"
"""Where a rank keeps its lead in `progress`: a record's, a dump's."""


def group_start_at(
    *, host_ids: Iterable[int], kind: str = "record", now: datetime | None = None
) -> datetime:
    """The instant every host of a new group samples from (this machine's clock)."""
    now = now or timezone.now()
    return now + timezone.timedelta(seconds=start_lead_s(list(host_ids), kind=kind))


def start_lead_s(host_ids: list[int], *, kind: str = "record") -> float:
    """Seconds from the request to the group's instant (module doc), within
    [MIN_LEAD_S, FLAMEDECK_GROUP_START_WAIT_S]. A dump learns from the last dumps of
    those hosts (`progress.dump_lead_s`: its session up, no attach ahead), else from
    their records, whose lead holds py-spy's attach too and so is never too short."""
    learned = learned_leads(host_ids, key=DUMP_KEY) if kind == "dump" else []
    learned = learned or learned_leads(host_ids)
    if learned:
        lead = max(learned) * LEARNED_MARGIN + LEARNED_PAD_S
    else:
        lead = FIRST_LEAD_S + FIRST_LEAD_PER_HOST_S * len(host_ids)
    return round(min(max(lead, MIN_LEAD_S), float(settings.FLAMEDECK_GROUP_START_WAIT_S)), 3)


def learned_leads(host_ids: list[int], *, key: str = RECORD_KEY) -> list[float]:
    """`key` (`lead_s`, or a dump's `dump_lead_s`) of the ranks of the hosts' last
    whole-job captures that have it (one query)."""
    if not host_ids:
        return []
    rows = (
        Capture.objects.filter(host_id__in=host_ids, group__isnull=False)
        .filter(progress__has_key=key)
        .annotate(lead=Cast(KT(f"progress__{key}"), FloatField()))
        .order_by("-pk")
        .values_list("lead", flat=True)[: HISTORY * 8 * len(host_ids)]
    )
    return [lead for lead in rows if lead is not None and lead >= 0]
