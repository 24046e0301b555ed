"""Login throttling: django-axes' lockout check, for logins that come with a request."""

from axes.backends import AxesStandaloneBackend


class LoginThrottleBackend(AxesStandaloneBackend):
    """Refuses a locked-out username and address before the password is checked (see settings.AXES_*).

    A login with no request (the test client's login(), authenticate() in a shell) has no address to
    throttle, and django-axes would raise for it: it passes on to the password check instead. Every login
    over HTTP (the login page, the admin's) comes with its request.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
