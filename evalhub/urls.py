from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path

from evalhub import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("p/<slug:project>/", views.project_home, name="project_home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("admin/", admin.site.urls),
    path("api/token", api.token_info, name="api_token"),
    path("", include("labeling.urls")),
    path("", include("judges.urls")),
    path("", include("evalhub.members.urls")),
    # Pages from before projects: redirected into the one project the user may open (views.old_page).
    re_path(r"^(?P<path>(?:datasets|rubrics|cases|label|disputes|policies|judges|runs|proposals|synthesis|promotion)"
            r"/.*)$", views.old_page, name="old_page"),
]

handler400 = "evalhub.views.bad_request"
handler403 = "evalhub.views.permission_denied"
handler404 = "evalhub.views.page_not_found"
handler500 = "evalhub.outage.server_error"
