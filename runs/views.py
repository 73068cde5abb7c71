"""Runs' own forms: create and edit a run, attach and detach its processes; create and
edit a host, attach a host's processes to a run.

Creating and editing needs the launch permission (operators); hosts' connection
settings need host admins. The pages that show runs and hosts with their captures are
runs/pages/views.py (profiles imports runs, never the reverse).
"""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from . import services
from .forms import AttachTreeForm, HostForm, RunForm, RunProcessForm
from .models import Host, Run, RunProcess
from .permissions import host_admin_required, launch_required
from .selectors import host_for_user, run_for_user

# --- runs --------------------------------------------------------------------------


def _save_run(form: RunForm, user) -> Run:
    data = form.cleaned_data
    with transaction.atomic():
        if form.instance.pk is not None:
            run = form.save()
            run.tags.set(services.tags_from_text(data["tags_text"]))
            return run
        run = services.run_create(
            user=user,
            name=data["name"],
            description=data["description"],
            tags=data["tags_text"],
            status=data["status"],
        )
        for field in (
            "started_at",
            "ended_at",
            "schedule_every_min",
            "library_paths",
            "step_threads",
        ):
            if data.get(field) is not None:  # keep run_create's start time unless one was given
                setattr(run, field, data[field])
        run.save()
    return run


@require_http_methods(["GET", "POST"])
@launch_required
def run_create(request):
    form = RunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        run = _save_run(form, request.user)
        messages.success(request, f"Run “{run.name}” created. Attach its processes below.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "run": None})


@require_http_methods(["GET", "POST"])
@launch_required
def run_edit(request, pk: int):
    run = run_for_user(user=request.user, pk=pk)
    form = RunForm(request.POST or None, instance=run)
    if request.method == "POST" and form.is_valid():
        _save_run(form, request.user)
        messages.success(request, "Run saved.")
        return redirect(run)
    return render(request, "runs/run_form.html", {"form": form, "run": run})


@require_POST
@launch_required
def run_process_add(request, pk: int):
    run = run_for_user(user=request.user, pk=pk)
    form = RunProcessForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Could not attach the process — {_form_errors(form)}")
        return redirect(run)
    data = form.cleaned_data
    try:
        attached = services.run_process_attach(
            run=run, host=data["host"], pid=data["pid"], role=data["role"]
        )
    except ValidationError as exc:
        messages.error(request, f"Could not attach the process — {' '.join(exc.messages)}")
        return redirect(run)
    _report_attached(request, [attached])
    return redirect(run)


def _form_errors(form) -> str:
    return "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())


def _report_attached(request, attached: list[services.Attached]) -> None:
    new = [a.process for a in attached if a.created]
    known = [a.process for a in attached if not a.created]
    if new:
        messages.success(request, f"Attached {', '.join(map(str, new))}.")
    if known:
        messages.info(request, f"Already attached: {', '.join(map(str, known))}.")
    for warning in dict.fromkeys(a.warning for a in attached if a.warning):
        messages.warning(request, f"Attached without checking: {warning}.")


@require_POST
@launch_required
def run_process_remove(request, pk: int, process_pk: int):
    process = get_object_or_404(RunProcess, pk=process_pk, run_id=pk)
    process.delete()
    messages.success(request, f"Detached {process.host.name}:{process.pid}.")
    return redirect("runs:run_detail", pk=pk)


# --- hosts -------------------------------------------------------------------------


@require_POST
@launch_required
def host_attach(request, pk: int):
    """Attach several processes of one host (a launcher's tree) to a run, new or existing."""
    host = host_for_user(user=request.user, pk=pk)
    form = AttachTreeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Could not attach — {_form_errors(form)}")
        return redirect(host)
    data = form.cleaned_data
    pairs = [(pid, request.POST.get(f"role_{pid}", "")) for pid in data["pids"]]
    try:
        with transaction.atomic():
            run = data["run"] or services.run_create(user=request.user, name=data["new_run"])
            attached = services.run_processes_attach(run=run, host=host, processes=pairs)
    except ValidationError as exc:
        messages.error(request, f"Could not attach — {' '.join(exc.messages)}")
        return redirect(host)
    _report_attached(request, attached)
    return redirect(run)


def _host_form_page(request, host: Host | None):
    form = HostForm(request.POST or None, instance=host, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.host_save(host=form.instance, user=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Host {saved.name} saved. Test the connection below.")
            return redirect(saved)
    return render(request, "runs/host_form.html", {"form": form, "host": host})


@require_http_methods(["GET", "POST"])
@host_admin_required
def host_create(request):
    return _host_form_page(request, None)


@require_http_methods(["GET", "POST"])
@launch_required
def host_edit(request, pk: int):
    return _host_form_page(request, host_for_user(user=request.user, pk=pk))
