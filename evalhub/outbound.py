"""The one door for requests evalhub itself sends to an address a project chose: the OTLP export of verdicts
and the monitors' webhooks. The address is untrusted (a lead typed it), so it must be http(s) and must not
reach the instance's own network: private, loopback, link-local, multicast and reserved addresses are refused
unless the instance allows them (EVALHUB_OUTBOUND_ALLOW_PRIVATE, which the tests set for their local
receivers). The name is resolved here and the request goes to the address that was checked, so a name that
resolves elsewhere on the second lookup (DNS rebinding) cannot slip past."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from django.conf import settings

TIMEOUT_SECONDS = 10.0
MAX_ANSWER_BYTES = 64 * 1024  # what is kept of an answer for the delivery log


class OutboundRefused(ValueError):
    """The address may not be sent to; the message says why, in words a lead can act on."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: str  # the answer's first MAX_ANSWER_BYTES, decoded leniently


def _allowed(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def checked_address(url: str) -> tuple[str, str]:
    """(host, ip) for `url` once it passes the rules above; raises OutboundRefused otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"}:
        raise OutboundRefused("the address must start with http:// or https://")
    if not parts.hostname:
        raise OutboundRefused("the address names no host")
    if parts.username or parts.password:
        raise OutboundRefused("the address may not carry a user name or password; send credentials as headers")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, ValueError) as error:
        raise OutboundRefused(f"the host {parts.hostname} cannot be resolved ({error})") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not getattr(settings, "EVALHUB_OUTBOUND_ALLOW_PRIVATE", False):
        refused = [a for a in addresses if not _allowed(a)]
        if refused:
            raise OutboundRefused(
                f"the host {parts.hostname} resolves to {refused[0]}, a private, loopback or reserved address; "
                "evalhub sends only to public addresses unless EVALHUB_OUTBOUND_ALLOW_PRIVATE is set"
            )
    return parts.hostname, str(addresses[0])


def post(url: str, content: bytes, headers: dict[str, str], timeout: float = TIMEOUT_SECONDS) -> Answer:
    """POSTs to `url` after checking it; raises OutboundRefused, or httpx.HTTPError when the send fails.
    Redirects are not followed: a redirect could lead anywhere the check refused."""
    host, ip = checked_address(url)
    parts = urlsplit(url)
    pinned = parts._replace(netloc=f"[{ip}]" if ":" in ip else ip)
    if parts.port:
        pinned = pinned._replace(netloc=f"{pinned.netloc}:{parts.port}")
    sent_headers = {**headers, "Host": parts.netloc.rsplit("@", 1)[-1]}
    # TLS must still verify the name the lead gave, not the address: the SNI and certificate check use it.
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        with client.stream(
            "POST", pinned.geturl(), content=content, headers=sent_headers, extensions=extensions
        ) as response:
            kept = b""
            for chunk in response.iter_bytes():
                kept += chunk[: MAX_ANSWER_BYTES - len(kept)]
                if len(kept) >= MAX_ANSWER_BYTES:
                    break
            return Answer(status=response.status_code, body=kept.decode("utf-8", "replace"))
