from django.urls import path

from . import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="run_list"),
    path("runs/new/", views.run_create, name="run_create"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/edit/", views.run_edit, name="run_edit"),
    path("runs/<int:pk>/processes/", views.run_process_add, name="run_process_add"),
    path(
        "runs/<int:pk>/processes/<int:process_pk>/remove/",
        views.run_process_remove,
        name="run_process_remove",
    ),
    path("hosts/", views.host_list, name="host_list"),
    path("hosts/new/", views.host_create, name="host_create"),
    path("hosts/<int:pk>/", views.host_detail, name="host_detail"),
    path("hosts/<int:pk>/edit/", views.host_edit, name="host_edit"),
    path("hosts/<int:pk>/attach/", views.host_attach, name="host_attach"),
]
