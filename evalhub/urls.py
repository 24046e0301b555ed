from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from evalhub import api, views

urlpatterns = [
    path("", views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("admin/", admin.site.urls),
    path("api/token", api.token_info, name="api_token"),
    path("", include("labeling.urls")),
    path("", include("judges.urls")),
]

handler400 = "evalhub.views.bad_request"
handler403 = "evalhub.views.permission_denied"
handler404 = "evalhub.views.page_not_found"
