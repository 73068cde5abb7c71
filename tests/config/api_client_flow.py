"""A whole flow through a client generated from /api/schema/ (openapi-python-client),
as a launcher and a head node would script it: register the ranks, capture all, wait
for the job report, read it, dump all, capture again and compare the two captures.

Run by tests/config/test_api_client.py beside the generated `flamedeck_client` package,
which it type-checks first (mypy --strict): every answer is narrowed with `isinstance`
to the schema's model, never cast. Prints one JSON object of what it read.

    FLAMEDECK_URL=… FLAMEDECK_TOKEN=… python api_client_flow.py RUN HOST:PID:ROLE…
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TypeVar

import httpx
from flamedeck_client import AuthenticatedClient
from flamedeck_client.api.compare import compare_groups_retrieve
from flamedeck_client.api.runs import register_create
from flamedeck_client.api.whole_job_captures import groups_retrieve, runs_capture_create
from flamedeck_client.models import (
    Group,
    GroupComparison,
    JobCaptureSettingsRequest,
    Registered,
    RegisterRequestRequest,
    ReportStatusEnum,
    RequestKindEnum,
    Stacks,
)

Answer = TypeVar("Answer")
WAIT_S = 180.0


def expect(answer: object, model: type[Answer], what: str) -> Answer:
    """The answer as the model the schema promises for success, or stop saying what came."""
    if not isinstance(answer, model):
        raise SystemExit(f"{what}: expected {model.__name__}, the server answered {answer!r}")
    return answer


def register(client: AuthenticatedClient, run: str, rank: str) -> Registered:
    host, pid, role = rank.split(":")
    body = RegisterRequestRequest(run=run, host=host, pid=int(pid), role=role)
    return expect(register_create.sync(client=client, body=body), Registered, f"register {role}")


def capture_all(client: AuthenticatedClient, run_id: int, body: JobCaptureSettingsRequest) -> Group:
    answer = runs_capture_create.sync(run_id, client=client, body=body)
    return expect(answer, Group, f"capture all of run {run_id}")


def wait_for_report(client: AuthenticatedClient, group_id: int) -> Group:
    """The whole-job capture once its report is no longer pending."""
    deadline = time.monotonic() + WAIT_S
    while True:
        group = expect(groups_retrieve.sync(group_id, client=client), Group, f"group {group_id}")
        if group.report_status != ReportStatusEnum.PENDING:
            return group
        if time.monotonic() > deadline:
            raise SystemExit(f"group {group_id}: no report after {WAIT_S} s: {group.to_dict()}")
        time.sleep(0.5)


def record(client: AuthenticatedClient, run_id: int) -> Group:
    body = JobCaptureSettingsRequest(duration=2, rate=50, native=False, subprocesses=False)
    return wait_for_report(client, capture_all(client, run_id, body).id)


def main(run: str, ranks: list[str]) -> dict[str, object]:
    client = AuthenticatedClient(
        base_url=os.environ["FLAMEDECK_URL"],
        token=os.environ["FLAMEDECK_TOKEN"],
        prefix="Token",  # the generator's default is "Bearer"
        raise_on_unexpected_status=True,
        timeout=httpx.Timeout(60.0),
    )
    with client:
        registered = [register(client, run, rank) for rank in ranks]
        run_id = registered[0].run.id
        first = record(client, run_id)
        body = JobCaptureSettingsRequest(kind=RequestKindEnum.DUMP, repeat=2, interval=0.5)
        dump = wait_for_report(client, capture_all(client, run_id, body).id)
        stacks = expect(dump.stacks, Stacks, f"the stacks of dump {dump.id}")
        second = record(client, run_id)
        compared = compare_groups_retrieve.sync(client=client, a=first.id, b=second.id)
        comparison = expect(compared, GroupComparison, "compare")
    return {
        "runs": sorted({r.run.id for r in registered}),
        "run_urls": sorted({r.run.url for r in registered}),
        "processes": sorted([r.process.role, r.process.host, r.process.pid] for r in registered),
        "records": [first.id, second.id],
        "report_status": [first.report_status.value, second.report_status.value],
        "ranks_captured": sorted(p.role for p in first.processes),
        "findings": [f.rule for f in first.findings],
        "straggler": None if first.straggler is None else first.straggler.name,
        "dump": dump.id,
        "verdict": stacks.verdict.kind.value,
        "dump_ranks": sorted(role for each in stacks.classes for role in each.ranks),
        "compared": [comparison.groups.a.id, comparison.groups.b.id],
        "roles": {
            r.role: [[s.state.value, s.verdict.value] for s in r.states] for r in comparison.roles
        },
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:])))
