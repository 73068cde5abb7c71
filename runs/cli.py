"""`flamedeck`: the head node's command line, a client of the JSON API (docs/api.md,
"From the head node").

    flamedeck capture-all RUN [--duration S] [--rate HZ] [--timeout S] [--json]
    flamedeck dump-all RUN [--repeat N] [--interval S] [--timeout S] [--json]

It finds the newest run named RUN, starts a whole-job capture (or dump) of its ranks,
waits for the job report and prints its findings (or the dump's verdict). The server
and the token come from `FLAMEDECK_URL` and `FLAMEDECK_TOKEN`, read as the ranks'
register snippet reads them (README). Standard library only: a head node needs none of
the server's dependencies (`pip install --no-deps`, or `python3 -m runs.cli` in a clone).

Exit codes (EXIT_*): 0 the answer is printed and the job is not stuck; 3 the job is
stuck (a dump's verdict, or the `stuck` finding of a capture's report); 2 usage (the
arguments, or the environment); 4 the server refused or could not be reached (no run
of that name included); 5 no answer: every rank failed, the report failed, or the wait
timed out.
Anything else (1) is a bug.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

EXIT_OK, EXIT_USAGE, EXIT_STUCK, EXIT_REFUSED, EXIT_NO_ANSWER = 0, 2, 3, 4, 5
POLL_S = 1.0
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class Refused(Exception):
    """The server said no, or could not be reached: exit EXIT_REFUSED."""


class NoAnswer(Exception):
    """The capture ran but gave no answer: exit EXIT_NO_ANSWER."""


class Api:
    """`FLAMEDECK_URL` and `FLAMEDECK_TOKEN`; JSON in, JSON out."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/"), token

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(  # noqa: S310 (api_from_env: http or https)
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"Token {self.token}", "Accept": "application/json"}
            | ({} if body is None else {"Content-Type": "application/json"}),
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
                answer = response.read(MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as exc:
            raise Refused(f"{method} {path}: {exc.code} {_error_text(exc.read(4000))}") from None
        except OSError as exc:  # refused, unknown name, timed out, TLS
            raise Refused(f"{self.url} cannot be reached: {getattr(exc, 'reason', exc)}") from None
        try:
            return json.loads(answer)
        except ValueError:
            raise Refused(f"{self.url} is not flamedeck, it answered {answer[:60]!r}") from None


def _error_text(body: bytes) -> str:
    """An error answer in one line: `detail`, else each field's messages."""
    try:
        error = json.loads(body)
    except ValueError:
        return " ".join(body.decode(errors="replace").split())[:200]
    if isinstance(error, dict) and "detail" in error:
        return str(error["detail"])
    if isinstance(error, dict):
        return "; ".join(f"{field}: {_messages(value)}" for field, value in error.items())
    return str(error)


def _messages(value: object) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def api_from_env(env: os._Environ[str] | dict[str, str]) -> Api:
    """As the register snippet: both set, and the URL an http(s) one."""
    url, token = env.get("FLAMEDECK_URL"), env.get("FLAMEDECK_TOKEN")
    if not (url and token):
        raise ValueError("set FLAMEDECK_URL and FLAMEDECK_TOKEN (as for the ranks: README)")
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"FLAMEDECK_URL={url!r} needs http:// or https://")
    return Api(url, token)


def find_run(api: Api, name: str) -> dict[str, Any]:
    """The newest run of that exact name (the list is newest first)."""
    runs = api.call("GET", "/api/runs/")
    if not isinstance(runs, list):
        raise Refused(f"{api.url}/api/runs/ is not flamedeck's list of runs")
    named = [run for run in runs if run.get("name") == name]
    if not named:
        raise Refused(f"no run named {name!r} among the newest {len(runs)} runs")
    if len(named) > 1:
        say(text(f"{len(named)} runs are named {name!r}: the newest, run {named[0]['id']}"))
    return named[0]


def start(api: Api, run: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    return api.call("POST", f"/api/runs/{run['id']}/capture/", body)


def wait_for_report(api: Api, group_id: int, timeout_s: float) -> dict[str, Any]:
    """The group once its report is stored (`report_status` no longer pending)."""
    deadline = time.monotonic() + timeout_s
    while True:
        group = api.call("GET", f"/api/groups/{group_id}/?limit=1")
        if group["report_status"] == "failed":
            raise NoAnswer(f"the report failed: {group.get('report_error') or 'no reason given'}")
        if group["report_status"] != "pending":
            return api.call("GET", f"/api/groups/{group_id}/")
        if time.monotonic() >= deadline:
            why = group.get("job_report_reason") or "the report is not stored yet"
            raise NoAnswer(f"no answer after {timeout_s:g} s ({why}); it goes on on the server")
        time.sleep(POLL_S)


def text(value: object) -> str:
    """Untrusted text (frame names, roles, errors) for a terminal: control characters
    (escape sequences included) written as escapes, never sent raw."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def say(line: str) -> None:
    print(f"flamedeck: {line}", file=sys.stderr, flush=True)


def is_stuck(group: dict[str, Any]) -> bool:
    if group.get("kind") == "dump":
        return ((group.get("stacks") or {}).get("verdict") or {}).get("kind") == "stuck"
    straggler = group.get("straggler") or {}
    return straggler.get("stuck") is True or any(
        f.get("rule") == "stuck" for f in group.get("findings") or []
    )


def report_lines(group: dict[str, Any]) -> list[str]:
    """A whole-job capture's report: the straggler, then each finding with its advice."""
    lines = _failure_lines(group)
    straggler = group.get("straggler")
    if straggler:
        why = "; ".join(
            f"{e['delta']:+.1f} pts in {e['frame']}" for e in straggler.get("explanation") or []
        )
        lines.append(text(f"straggler: {straggler['name']}" + (f": {why}" if why else "")))
    findings = group.get("findings") or []
    lines.append(f"findings: {len(findings)}" if findings else "findings: none")
    for finding in findings:
        ranks = ", ".join(finding.get("ranks") or [])
        lines.append(text(f"  [{finding['severity']}] {finding['rule']}: {finding['title']}"))
        lines += [text(f"      ranks: {ranks}")] if ranks else []
        lines += [text(f"      {finding['advice']}")] if finding.get("advice") else []
    return lines


def dump_lines(group: dict[str, Any]) -> list[str]:
    """A whole-job dump: the verdict in one sentence, each class of ranks, each failure."""
    stacks = group.get("stacks") or {}
    verdict = stacks.get("verdict") or {}
    lines = [text(f"verdict: {verdict.get('kind', 'none')}: {verdict.get('explanation', '')}")]
    for each in stacks.get("classes") or []:
        moving = "moving" if each.get("moving") else "not moving"
        where = f"{each.get('user_frame') or '(no user frame)'} ({each.get('state')}, {moving})"
        lines.append(text(f"  {', '.join(each.get('ranks') or [])}: {where}"))
    for failed in stacks.get("failed") or []:
        lines.append(text(f"  failed: {failed['rank']} ({failed['cause']}): {failed['error']}"))
    return _failure_lines(group) + lines


def _failure_lines(group: dict[str, Any]) -> list[str]:
    failed = group.get("failed_hosts") or []
    return [
        text(f"failed on {h['host']} ({h['cause']}, {len(h['ranks'])} ranks): {h['error']}")
        for h in failed
    ]


def capture_body(args: argparse.Namespace, run: dict[str, Any]) -> dict[str, Any]:
    """A dump, or a record with the run's remembered settings ("Capture all") and the flags."""
    if args.command == "dump-all":
        return {"kind": "dump", "repeat": args.repeat, "interval": args.interval}
    remembered = run.get("capture_settings") or {}
    flags = {"duration": args.duration, "rate": args.rate}
    return {**remembered, **{k: v for k, v in flags.items() if v is not None}, "kind": "record"}


def run_command(args: argparse.Namespace, api: Api) -> int:
    run = find_run(api, args.run)
    run = api.call("GET", f"/api/runs/{run['id']}/")
    group = start(api, run, capture_body(args, run))
    page = f"{api.url}/groups/{group['id']}/"
    say(f"{args.command} of {text(args.run)} (run {run['id']}): {group['captures']} ranks, {page}")
    group = wait_for_report(api, group["id"], args.timeout)
    if group["status"] == "failed":
        print("\n".join(_failure_lines(group)))
        raise NoAnswer(f"every rank failed: {page}")
    if args.json:
        print(json.dumps(group, indent=1))
    else:
        title = "whole-job dump" if group["kind"] == "dump" else "whole-job capture"
        print(text(f"{args.run}: {title} {group['id']}, {group['status']}, {page}"))
        print("\n".join(dump_lines(group) if group["kind"] == "dump" else report_lines(group)))
    return EXIT_STUCK if is_stuck(group) else EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="flamedeck",
        description="Capture or dump every rank of a run from the command line "
        "(FLAMEDECK_URL, FLAMEDECK_TOKEN).",
        epilog="exit: 0 answered, not stuck; 2 usage; 3 the job is stuck; "
        "4 refused or unreachable; 5 no answer (every rank failed, report failed, timed out)",
    )
    commands = top.add_subparsers(dest="command", required=True)
    record = commands.add_parser("capture-all", help="sample every rank, print the findings")
    record.add_argument("--duration", type=int, help="seconds (default: the run's setting)")
    record.add_argument("--rate", type=int, help="samples a second (default: the run's)")
    dump = commands.add_parser("dump-all", help="dump every rank, print the verdict")
    dump.add_argument("--repeat", type=int, default=3, help="dumps of each rank (default 3)")
    dump.add_argument("--interval", type=float, default=1.0, help="seconds between (default 1)")
    for command in (record, dump):
        command.add_argument("run", metavar="RUN", help="the run's name")
        command.add_argument("--timeout", type=float, default=600.0, help="seconds to wait")
        command.add_argument("--json", action="store_true", help="print the group's JSON")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        api = api_from_env(os.environ)
    except ValueError as exc:
        say(str(exc))
        return EXIT_USAGE
    try:
        return run_command(args, api)
    except Refused as exc:
        say(text(exc))
        return EXIT_REFUSED
    except NoAnswer as exc:
        say(text(exc))
        return EXIT_NO_ANSWER


if __name__ == "__main__":
    sys.exit(main())
