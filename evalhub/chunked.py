"""Request bodies sent without a Content-Length (`Transfer-Encoding: chunked`, as the OpenTelemetry JS
exporter and any streaming client send them), read whole under every server evalhub runs on.

Django reads a body only as far as CONTENT_LENGTH says, so a chunked body would be read as empty. This WSGI
wrapper (evalhub/wsgi.py) reads such a body before Django sees the request and hands it on with the length
it had, so each view's own size limit then applies as to any body: it reads at most the largest body any
endpoint accepts plus one byte (`body_cap`), so a longer one is declared over every limit and refused (413)
without being kept whole; past 1 MiB it is spooled to a temporary file rather than held in memory.

- gunicorn decodes the chunks itself and says so (`wsgi.input_terminated`): the input ends where the body does.
- Django's runserver passes the connection on undecoded, behind a stream limited to the declared length
  (none): the chunks are decoded here from the stream under it, to the end of the framing, so the connection
  stays in step and the next request on it is read as one. A server that does neither gets 411 Length
  Required, and framing that is not chunked 400; both close the connection.
"""

import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from django.conf import settings

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]
MAX_CHUNK_LINE = 1024  # a chunk's size line (hex size and extensions)
IN_MEMORY_BYTES = 1024 * 1024  # a longer body is spooled to a temporary file, not held in memory


def body_cap() -> int:
    """The largest body any endpoint reads: over it, a body is refused wherever it is sent."""
    return max(settings.EVALHUB_OTLP_MAX_BYTES, settings.EVALHUB_IMPORT_MAX_BYTES,
               settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)


class ChunkedBodies:
    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        if chunked and not environ.get("CONTENT_LENGTH"):
            body = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY_BYTES)
            try:
                read = self._body(environ, body, body_cap() + 1)
            except ValueError as exc:
                start_response("400 Bad Request", [("Content-Type", "text/plain")])
                return _closing(f"The chunked body cannot be read: {exc}".encode())
            if read is None:
                start_response("411 Length Required", [("Content-Type", "text/plain")])
                return _closing(b"Send a Content-Length: this server cannot read a chunked body.")
            body.seek(0)
            environ["wsgi.input"] = body
            environ["CONTENT_LENGTH"] = str(read)
        return self.app(environ, start_response)

    @staticmethod
    def _body(environ: Environ, out: IO[bytes], most: int) -> int | None:
        """Write at most `most` bytes of the body to `out`; how many, or None when this server's input
        cannot be read as chunked."""
        stream = environ["wsgi.input"]
        if environ.get("wsgi.input_terminated"):  # gunicorn: decoded, and it ends with the body
            size = 0
            while size < most and (part := stream.read(min(65536, most - size))):
                out.write(part)
                size += len(part)
            return size
        # runserver: Django's LimitedStream over the connection, limited to nothing; read under it.
        read, readline = getattr(stream, "_read", None), getattr(stream, "_readline", None)
        if read is None or readline is None:
            return None
        return _dechunked(read, readline, out, most)


def _closing(text: bytes) -> Iterator[bytes]:
    """An answer of no known length, so the server closes the connection after it (a WSGI app may not send
    Connection itself): what is left of the request on it is never read as a new one."""
    yield text


def _dechunked(read: Callable[[int], bytes], readline: Callable[[int], bytes], out: IO[bytes], most: int) -> int:
    """The body of HTTP/1.1 chunked framing (RFC 9112 §7.1), at most `most` bytes of it kept; the framing is
    always read to its end (trailers included), the rest of a longer body read and dropped, so the next
    request on the connection starts where it should (runserver serves one developer)."""
    size = 0
    while True:
        line = readline(MAX_CHUNK_LINE)
        try:
            length = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ValueError(f"a chunk's size line {line[:40]!r} is not hex") from None
        if length == 0:
            while readline(MAX_CHUNK_LINE).strip():  # trailer fields, up to the empty line
                pass
            return size
        while length:
            data = read(min(length, 65536))
            if not data:
                raise ValueError("the body ended inside a chunk")
            length -= len(data)
            if size < most:
                size += out.write(data[: most - size])
        readline(MAX_CHUNK_LINE)  # the CRLF after the chunk's data
