from django.urls import include, path

from evalhub.members import views

app_name = "members"

# A project's people and tokens: its leads' pages, under /p/<project>/ like every page of a project.
project_pages = [
    path("members/", views.members, name="members"),
    path("members/invite/", views.member_invite, name="invite"),
    path("members/<int:membership_id>/role/", views.member_role, name="role"),
    path("members/<int:membership_id>/remove/", views.member_remove, name="remove"),
    path("members/<int:membership_id>/datasets/", views.member_datasets, name="datasets"),
    path("members/invitations/<int:invitation_id>/withdraw/", views.invitation_withdraw, name="withdraw"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/new/", views.token_create, name="token_create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]

urlpatterns = [
    path("p/<slug:project>/", include(project_pages)),
    path("projects/new/", views.project_create, name="project_create"),
    # The invitee's side: accept or decline from the home page, or open the link an invitation carries.
    path("invitations/<int:invitation_id>/accept/", views.invitation_accept, name="invitation_accept"),
    path("invitations/<int:invitation_id>/decline/", views.invitation_decline, name="invitation_decline"),
    path("invitations/<str:token>/", views.invitation, name="invitation"),
]
