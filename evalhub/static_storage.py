"""The static files storage: collectstatic's hashed, compressed copies, and a working default before it ran."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    """Hashed names from the manifest collectstatic writes (scripts/serve.sh runs it). Before any collectstatic
    there is no manifest: pages name the files plainly and WhiteNoise serves them from the source folders
    (settings.WHITENOISE_USE_FINDERS), so `manage.py runserver` with DEBUG off works instead of answering
    every page with a 500 for a missing manifest entry."""

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:  # no manifest loaded
            return name
        return super().stored_name(name)
