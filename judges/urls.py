from django.urls import path

from judges import views

app_name = "judges"

urlpatterns = [
    # Judge configs (issue 5)
    path("judges/", views.judge_index, name="judge_index"),
    path("rubrics/<slug:slug>/judges/", views.config_list, name="config_list"),
    path("rubrics/<slug:slug>/judges/new/", views.config_create, name="config_create"),
    path("judges/<int:config_id>/", views.config_detail, name="config_detail"),
    path("judges/<int:config_id>/run/", views.run_create, name="run_create"),
    path("prices/", views.price_list, name="price_list"),
    path("prices/<int:price_id>/edit/", views.price_edit, name="price_edit"),
    # Runs (issue 5)
    path("runs/", views.run_list, name="run_list"),
    path("runs/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<int:run_id>/progress/", views.run_progress, name="run_progress"),
    path("runs/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<int:run_id>/retry/", views.run_retry, name="run_retry"),
    path("runs/<int:run_id>/judgments.<str:fmt>", views.run_export, name="run_export"),
]
