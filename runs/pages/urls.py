"""The run and host pages (runs/pages/views.py), under the `runs` namespace beside
runs' own forms (config/urls.py)."""

from django.urls import path

from runs.pages import views as run_views

urlpatterns = [
    path("", run_views.run_list, name="run_list"),
    path("runs/<int:pk>/", run_views.run_detail, name="run_detail"),
    path("hosts/", run_views.host_list, name="host_list"),
    path("hosts/<int:pk>/", run_views.host_detail, name="host_detail"),
]
