"""The JSON API (contract 3). Session or token auth; anonymous requests get 401/403."""

from django.urls import path

from profiles import api as profiles_api
from profiles import compare_views
from runs import api as runs_api

app_name = "api"
urlpatterns = [
    path("hosts/", runs_api.host_list, name="host_list"),
    path("hosts/<int:pk>/", runs_api.host_detail, name="host_detail"),
    path("hosts/<int:pk>/check/", runs_api.host_check, name="host_check"),
    path("runs/", runs_api.run_list, name="run_list"),
    path("runs/<int:pk>/capture/", profiles_api.run_capture_all, name="run_capture_all"),
    path("groups/<int:pk>/", profiles_api.group_detail, name="group_detail"),
    path("groups/<int:pk>/flamegraph/", profiles_api.group_flamegraph, name="group_flamegraph"),
    path("captures/", profiles_api.capture_list, name="capture_list"),
    path("captures/import/", profiles_api.capture_import, name="capture_import"),
    path("captures/<int:pk>/", profiles_api.capture_detail, name="capture_detail"),
    path(
        "captures/<int:pk>/flamegraph/", profiles_api.capture_flamegraph, name="capture_flamegraph"
    ),
    path("captures/<int:pk>/cancel/", profiles_api.capture_cancel, name="capture_cancel"),
    path("compare/", compare_views.compare_api, name="compare"),
]
