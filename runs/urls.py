"""Runs' own forms. They share the `runs` namespace with the run and host pages of
runs/pages/urls.py, which show captures (runs.pages reads profiles; the rest of runs
never does); config/urls.py puts the two lists under that one name."""

from django.urls import path

from . import views

urlpatterns = [
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/<int:pk>/edit/", views.run_edit, name="run_edit"),
    path("runs/<int:pk>/processes/", views.run_process_add, name="run_process_add"),
    path(
        "runs/<int:pk>/processes/<int:process_pk>/remove/",
        views.run_process_remove,
        name="run_process_remove",
    ),
    path("hosts/new/", views.host_create, name="host_create"),
    path("hosts/<int:pk>/edit/", views.host_edit, name="host_edit"),
    path("hosts/<int:pk>/attach/", views.host_attach, name="host_attach"),
]
