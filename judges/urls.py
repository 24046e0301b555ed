app_name = "judges"

urlpatterns: list = []
