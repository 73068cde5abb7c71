"""The JSON API (contract 3). Session or token auth; anonymous requests get 401/403."""

from django.urls import path

from config import api_views
from profiles.api import time_views
from profiles.api import views as profiles_api
from profiles.compare import groups as compare_groups
from profiles.compare import views as compare_views
from profiles.watches import api as watch_api
from runs import api as runs_api

app_name = "api"
urlpatterns = [
    path("", api_views.index, name="index"),
    path("schema/", api_views.schema, name="schema"),
    path("docs/", api_views.docs, name="docs"),
    path("hosts/", runs_api.host_list, name="host_list"),
    path("hosts/<int:pk>/", runs_api.host_detail, name="host_detail"),
    path("hosts/<int:pk>/check/", runs_api.host_check, name="host_check"),
    path("runs/", runs_api.run_list, name="run_list"),
    path("runs/<int:pk>/", runs_api.run_detail, name="run_detail"),
    path("runs/<int:pk>/processes/", runs_api.run_processes, name="run_processes"),
    path(
        "runs/<int:pk>/processes/<int:process_pk>/",
        runs_api.run_process_detail,
        name="run_process_detail",
    ),
    path("runs/<int:pk>/processes/check/", runs_api.run_processes_check, name="run_check"),
    path("register/", runs_api.register, name="register"),
    path("runs/<int:pk>/capture/", profiles_api.run_capture_all, name="run_capture_all"),
    path("groups/<int:pk>/", profiles_api.group_detail, name="group_detail"),
    path("groups/<int:pk>/live/", profiles_api.group_live, name="group_live"),
    path("groups/<int:pk>/flamegraph/", profiles_api.group_flamegraph, name="group_flamegraph"),
    path("captures/", profiles_api.capture_list, name="capture_list"),
    path("captures/import/", profiles_api.capture_import, name="capture_import"),
    path("captures/<int:pk>/", profiles_api.capture_detail, name="capture_detail"),
    path(
        "captures/<int:pk>/flamegraph/", profiles_api.capture_flamegraph, name="capture_flamegraph"
    ),
    path("captures/<int:pk>/sandwich/", profiles_api.capture_sandwich, name="capture_sandwich"),
    path("captures/<int:pk>/timeline/", time_views.capture_timeline, name="capture_timeline"),
    path("captures/<int:pk>/window/", time_views.capture_window, name="capture_window"),
    path("groups/<int:pk>/timeline/", time_views.group_timeline, name="group_timeline"),
    path("captures/<int:pk>/cancel/", profiles_api.capture_cancel, name="capture_cancel"),
    path("compare/", compare_views.compare_api, name="compare"),
    path("compare/groups/", compare_groups.compare_groups_api, name="compare_groups"),
    path("watches/", watch_api.watch_list, name="watch_list"),
    path("watches/<int:pk>/", watch_api.watch_detail, name="watch_detail"),
]
