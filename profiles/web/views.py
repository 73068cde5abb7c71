"""Pages for captures (list, detail, dump, downloads, comments, tags, import) and
keyword sets.

Pages read stored stats and hand them to the page's JS through `json_script`; the
flamegraph comes from the stored tree through the JSON API, downloads from the stored
samples and the export the analysis wrote. Nothing here parses samples: imports and
re-analyses are queued for the analysis worker.
"""

import gzip
from collections.abc import Iterator

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.middleware import refusal
from config.params import parse_id, query_id, query_page
from profiles.captures import redact, services
from profiles.captures.selectors import capture_rows, launch_context, with_row_states
from profiles.compare.lens import capture_set_name
from profiles.models import Capture, Comment, Keyword, KeywordSet
from profiles.storage import downloads
from profiles.storage.uploads import UploadTooLarge
from profiles.web.forms import (
    CaptureTagsForm,
    CommentForm,
    ImportForm,
    KeywordSetForm,
    ReanalyzeForm,
)
from runs.models import Host, Tag
from runs.permissions import can_launch, can_remove_any_comment, launch_required
from runs.services import tags_from_text

CAPTURES_PER_PAGE = 50
CHUNK = 64 * 1024


def _get_capture_for_user(user, pk: int, full: bool = False) -> Capture:
    qs = Capture.objects.select_related("host", "run", "process", "keyword_set", "requested_by")
    if not full:
        qs = qs.defer("stats", "gpu_samples")
    return get_object_or_404(qs, pk=pk)


def _back_to(request, capture: Capture, anchor: str = ""):
    """Back to where the form was posted from (keeps the view state in the URL)."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}):
        return redirect(target.split("#")[0] + anchor)
    return redirect(capture.get_absolute_url() + anchor)


# --- capture list ------------------------------------------------------------------


def _filtered_captures(params) -> QuerySet[Capture]:
    captures = Capture.objects.all()
    if tag := params.get("tag"):
        captures = captures.filter(tags__name=tag)
    if params.get("status") in Capture.Status.values:
        captures = captures.filter(status=params["status"])
    if params.get("kind") in Capture.Kind.values:
        captures = captures.filter(kind=params["kind"])
    if (host := query_id(params, "host")) is not None:
        captures = captures.filter(host_id=host)
    if (run := query_id(params, "run")) is not None:
        captures = captures.filter(run_id=run)
    if params.get("verdict") in ("ok", "degraded", "unreliable"):
        captures = captures.filter(stats__lag__verdict=params["verdict"])
    return capture_rows(captures).order_by("-queued_at")


@require_GET
def capture_list(request):
    page = Paginator(_filtered_captures(request.GET), CAPTURES_PER_PAGE).get_page(
        query_page(request.GET)
    )
    page.object_list = with_row_states(page.object_list)
    try:
        compare_with = str(parse_id(request.GET.get("compare", ""), name="compare"))
    except ValidationError:
        compare_with = ""
    on_page = {str(c.pk) for c in page.object_list}
    filters = {k: v for k, v in request.GET.items() if k in LIST_FILTERS and v}
    context = {
        # Page 1 takes new captures in as they come (capture_rows.js).
        "rows_query": urlencode({**filters, "show_run": 1, "pick": 1}) if page.number == 1 else "",
        "compare_with": compare_with,
        # The capture to compare with is not on this page: keep it as a hidden pick.
        "compare_with_hidden": bool(compare_with) and compare_with not in on_page,
        "page": page,
        "params": request.GET,
        "statuses": Capture.Status.choices,
        "kinds": Capture.Kind.choices,
        "hosts": Host.objects.only("pk", "name"),
        "tags": Tag.objects.filter(captures__isnull=False).distinct(),
    }
    return render(request, "profiles/capture_list.html", context)


LIST_FILTERS = ("tag", "status", "kind", "host", "run", "verdict")


@require_GET
def capture_rows_newer(request):
    """`/captures/rows/?after=ID&<filters>`: table rows of the captures newer than ID
    (a table's newest), newest first, so tables add new captures without a reload.
    `show_run=1` and `pick=1` ask for the run column and the compare box."""
    after = query_id(request.GET, "after") or 0
    captures = with_row_states(
        _filtered_captures(request.GET).filter(pk__gt=after)[:CAPTURES_PER_PAGE]
    )
    context = {
        "captures": captures,
        "show_run": request.GET.get("show_run") == "1",
        "compare_pick": request.GET.get("pick") == "1",
    }
    return render(request, "profiles/_capture_rows.html", context)


# --- capture detail ----------------------------------------------------------------


def _dump_groups(stats: dict) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {"Active": [], "Idle": [], "State unknown": []}
    for thread in stats.get("dump_threads") or []:
        if thread.get("idle") or thread.get("active") is False:
            groups["Idle"].append(thread)
        elif thread.get("active"):
            groups["Active"].append(thread)
        else:
            groups["State unknown"].append(thread)
    return [(name, threads) for name, threads in groups.items() if threads]


def _page_stats(capture: Capture) -> dict | None:
    """Stats for the page's JS, without what it does not draw."""
    if not capture.stats or capture.stats.get("format") == "dump":
        return None
    return {k: v for k, v in capture.stats.items() if k != "flamegraph"}


@require_GET
def capture_detail(request, pk: int):
    capture = _get_capture_for_user(request.user, pk, full=True)
    # For this page only; never saved.
    capture.stats = redact.for_viewer(capture.stats, user=request.user, captures=[capture])
    stats = capture.stats or {}
    lag = stats.get("lag") or None
    is_dump = capture.kind == Capture.Kind.DUMP or stats.get("format") == "dump"
    wanted_ks = query_id(request.GET, "ks")
    context = {
        "capture": capture,
        "stats": stats,
        "lag": lag,
        "is_dump": is_dump,
        # py-spy's own error is not a sampler that fell behind: shown as the error.
        "lag_bad": bool(lag and lag.get("verdict") != "ok" and not lag.get("error")),
        "dump_groups": _dump_groups(stats) if is_dump else [],
        "comments": _comments_for_viewer(capture, request.user),
        "can_remove_comments": can_remove_any_comment(request.user),
        "tags_text": " ".join(t.name for t in capture.tags.all()),
        "keyword_sets": KeywordSet.objects.all(),
        # Categories and keywords are a lens the user picked: labelled with its set.
        "lens": capture_set_name(capture.keyword_set),
        "ks_mismatch": wanted_ks is not None and wanted_ks != capture.keyword_set_id,
        "can_launch": can_launch(request.user),
        "page_data": {
            "id": capture.pk,
            "status": capture.status,
            "kind": capture.kind,
            "final": capture.is_final,
            "host": capture.host_id,
            "pid": capture.pid,
            "run": capture.run_id,
            "process": capture.process_id,
            "settings": capture.pyspy_settings,
            "hasFlamegraph": bool(capture.flamegraph_file),
            "stats": _page_stats(capture),
        },
        "launch": launch_context(request.user, capture.run, _same_process(capture)),
        "previous": _previous_captures(capture),
        "coverage": _coverage(capture, lag),
        "log_problem": _log_problem(capture, stats, is_dump),
    }
    return render(request, "profiles/capture_detail.html", context)


def _comments_for_viewer(capture: Capture, user) -> list[Comment]:
    """The comments, each pinned frame as `user` may see it (never saved)."""
    comments = list(capture.comments.select_related("author"))
    frames = redact.for_viewer([c.frame for c in comments], user=user, captures=[capture])
    for comment, frame in zip(comments, frames, strict=True):
        comment.frame = frame
    return comments


def _previous_captures(capture: Capture) -> dict[str, int | str | None]:
    """The latest earlier done capture of the same process, and of the same run: of the
    same role there when the capture has one (a job restarted under new PIDs keeps its
    roles), never another rank of the same whole-job capture (a peer, not a before)."""
    earlier = (
        Capture.objects.filter(status=Capture.Status.DONE, queued_at__lt=capture.queued_at)
        .exclude(kind=Capture.Kind.DUMP)
        .order_by("-queued_at")
        .values_list("pk", flat=True)
    )
    if capture.group_id:
        earlier = earlier.exclude(group_id=capture.group_id)
    same_process = _same_process(capture) if capture.host_id else Q(pk__in=[])
    role = capture.process.role if capture.process_id else ""
    in_run = earlier.filter(run_id=capture.run_id)
    if role:
        in_run = in_run.filter(process__role=role)
    return {
        "process": earlier.filter(same_process).first() if capture.host_id else None,
        "run": in_run.first() if capture.run_id else None,
        "role": role,
    }


def _coverage(capture: Capture, lag: dict | None) -> dict[str, float] | None:
    """Seconds sampled of the seconds asked, for a capture whose process exited."""
    covered = (capture.progress or {}).get("covered_s")
    exited = (lag or {}).get("stop_reason") == "process exited" or covered is not None
    if not exited or capture.kind != Capture.Kind.RECORD:
        return None
    return {"covered_s": covered, "asked_s": capture.duration}


def _log_problem(capture: Capture, stats: dict, is_dump: bool) -> str:
    """Why a stored log gave no lag report (or py-spy's own error line)."""
    lag = stats.get("lag")
    if lag and lag.get("error"):
        return f"py-spy said: {lag['error']}"
    if capture.log_file and stats.get("total_samples") and not lag and not is_dump:
        source = "The attached log" if capture.kind == Capture.Kind.IMPORT else "py-spy's log"
        return (
            f"{source} holds none of py-spy's lines (no “Sampling process”, lag or "
            "“Wrote … Samples” line), so the sampler could not be checked."
        )
    return ""


@require_POST
@launch_required
def capture_delete(request, pk: int):
    capture = _get_capture_for_user(request.user, pk)
    try:
        services.capture_delete_failed(capture=capture)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect(capture)
    messages.success(request, f"Failed capture #{pk} and its files were deleted.")
    return redirect("profiles:capture_list")


def _same_process(capture: Capture):
    if capture.process_id:
        return Q(process_id=capture.process_id) | Q(host_id=capture.host_id, pid=capture.pid)
    return Q(host_id=capture.host_id, pid=capture.pid) if capture.host_id else Q(pk__in=[])


# --- downloads ---------------------------------------------------------------------


def _gunzipped(field) -> Iterator[bytes]:
    with field.open("rb") as stored, gzip.GzipFile(fileobj=stored) as fh:
        while block := fh.read(CHUNK):
            yield block


def _download_body(capture: Capture, what: str, user) -> tuple[Iterator[bytes], str, str]:
    """Stored data, gunzipped as it streams: never parsed in the request. For a viewer
    of the server's own processes command lines and locals are redacted line by line
    (redact.download); a speedscope file of subprocesses, one JSON document, is refused."""
    fmt = capture.raw_format
    if what == "log":
        if not capture.log_file:
            raise Http404("This capture has no py-spy log.")
        body = redact.download(_gunzipped(capture.log_file), "log", user=user, capture=capture)
        return body, "text/plain", "py-spy.log"
    if not capture.samples_downloadable:
        raise Http404("The samples of this capture were pruned, never written or not parsed.")
    if fmt == "dump":
        body = redact.download(_gunzipped(capture.raw_file), "dump", user=user, capture=capture)
        return body, "text/plain", "dump.txt"
    native = {"folded": "raw", "speedscope": "speedscope"}[what]
    field = capture.raw_file if fmt == native else capture.export_file
    if not field:
        raise Http404("This capture has no stored export; re-analyse it to make one.")
    if what == "folded":
        body = redact.download(_gunzipped(field), "folded", user=user, capture=capture)
        return body, "text/plain", "folded.txt"
    if capture.subprocesses and redact.hides_server_details(capture, user):
        raise PermissionDenied(
            f"Its process frames name command lines on the flamedeck server {redact.HIDDEN}; "
            "the folded download is redacted."
        )
    return _gunzipped(field), "application/json", "speedscope.json"


@require_GET
def capture_download(request, pk: int, what: str):
    capture = _get_capture_for_user(request.user, pk)
    if what not in ("folded", "speedscope", "log"):
        raise Http404()
    body, content_type, suffix = _download_body(capture, what, request.user)
    return downloads.streamed(body, content_type, downloads.capture_file_name(capture, suffix))


# --- annotations -------------------------------------------------------------------


@require_POST
def capture_comment(request, pk: int):
    capture = _get_capture_for_user(request.user, pk)
    form = CommentForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A comment needs some text.")
        return _back_to(request, capture, "#comments")
    try:
        comment = services.comment_create(capture=capture, author=request.user, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return _back_to(request, capture, "#comments")
    return _back_to(request, capture, f"#comment-{comment.pk}")


def _get_comment(pk: int, comment_pk: int) -> Comment:
    return get_object_or_404(
        Comment.objects.select_related("capture"), pk=comment_pk, capture_id=pk
    )


@require_POST
def comment_edit(request, pk: int, comment_pk: int):
    comment = _get_comment(pk, comment_pk)
    if comment.author_id != request.user.pk:  # before anything else: nobody edits another's words
        raise PermissionDenied("You can edit only your own comments.")
    form = CommentForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A comment needs some text.")
        return _back_to(request, comment.capture, f"#comment-{comment.pk}")
    try:
        services.comment_update(
            comment=comment, editor=request.user, body=form.cleaned_data["body"]
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return _back_to(request, comment.capture, f"#comment-{comment.pk}")


@require_POST
def comment_delete(request, pk: int, comment_pk: int):
    comment = _get_comment(pk, comment_pk)
    services.comment_delete(comment=comment, user=request.user)
    messages.success(request, "Comment deleted.")
    return _back_to(request, comment.capture, "#comments")


@require_POST
@launch_required
def capture_tags(request, pk: int):
    capture = _get_capture_for_user(request.user, pk)
    form = CaptureTagsForm(request.POST)
    if form.is_valid():
        services.capture_set_tags(capture=capture, tags=tags_from_text(form.cleaned_data["tags"]))
        messages.success(request, "Tags saved.")
    return _back_to(request, capture)


@require_POST
@launch_required
def capture_reanalyze(request, pk: int):
    capture = _get_capture_for_user(request.user, pk)
    form = ReanalyzeForm(request.POST)
    if not form.is_valid():
        raise Http404("No such keyword set.")
    keyword_set = form.cleaned_data["keyword_set"]
    try:
        services.capture_reanalyze(capture=capture, keyword_set=keyword_set, enqueue=True)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Re-analysing with “{keyword_set.name}”.")
    return redirect(f"{capture.get_absolute_url()}?ks={keyword_set.pk}")


@require_http_methods(["GET", "POST"])
@launch_required
def capture_import(request):
    form = ImportForm(
        request.POST or None, request.FILES or None, initial={"run": query_id(request.GET, "run")}
    )
    if request.method == "POST" and form.is_valid():
        try:
            capture = services.capture_import(
                user=request.user,
                file=form.cleaned_data["file"],
                log=form.cleaned_data["log"],
                run=form.cleaned_data["run"],
                enqueue=True,
            )
        except UploadTooLarge as exc:
            return refusal(request, str(exc), 413)
        return redirect(capture)
    return render(request, "profiles/capture_import.html", {"form": form})


# --- keyword sets ------------------------------------------------------------------


@require_GET
def keywordset_list(request):
    sets = KeywordSet.objects.annotate(keyword_count=Count("keywords"))
    return render(
        request,
        "profiles/keywordset_list.html",
        {"sets": sets, "can_launch": can_launch(request.user)},
    )


@require_GET
def keywordset_detail(request, pk: int):
    keyword_set = get_object_or_404(KeywordSet, pk=pk)
    by_category: dict[str, list[Keyword]] = {}
    for keyword in keyword_set.keywords.all():
        by_category.setdefault(keyword.category, []).append(keyword)
    context = {
        "keyword_set": keyword_set,
        "by_category": by_category,
        "capture_count": Capture.objects.filter(keyword_set=keyword_set).count(),
        "can_launch": can_launch(request.user),
    }
    return render(request, "profiles/keywordset_detail.html", context)


@transaction.atomic
def _save_keyword_set(form: KeywordSetForm) -> KeywordSet:
    keyword_set = form.save()
    if keyword_set.is_default:
        KeywordSet.objects.exclude(pk=keyword_set.pk).update(is_default=False)
    keyword_set.keywords.all().delete()
    Keyword.objects.bulk_create(
        Keyword(keyword_set=keyword_set, position=i, category=category, keyword=keyword)
        for i, (category, keyword) in enumerate(form.cleaned_data["keywords_text"])
    )
    return keyword_set


def _keywordset_form_page(request, keyword_set: KeywordSet | None):
    form = KeywordSetForm(request.POST or None, instance=keyword_set)
    if request.method == "POST" and form.is_valid():
        saved = _save_keyword_set(form)
        messages.success(request, f"Keyword set “{saved.name}” saved.")
        return redirect(saved)
    return render(
        request, "profiles/keywordset_form.html", {"form": form, "keyword_set": keyword_set}
    )


@require_http_methods(["GET", "POST"])
@launch_required
def keywordset_create(request):
    return _keywordset_form_page(request, None)


@require_http_methods(["GET", "POST"])
@launch_required
def keywordset_edit(request, pk: int):
    return _keywordset_form_page(request, get_object_or_404(KeywordSet, pk=pk))
