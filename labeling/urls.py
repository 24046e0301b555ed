from django.urls import path

from labeling import views

app_name = "labeling"

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset_list"),
    path("rubrics/", views.rubric_list, name="rubric_list"),
]
