"""The one way gpunode opens http(s) URLs: an opener with only http and https handlers.

Its own module so that `urllib.request` and `http.client` (and the HTTPS handler's CA
certificates) load only when something is downloaded, not on every run.
"""

from __future__ import annotations

import http.client
import urllib.parse
import urllib.request
from typing import Any

_SCHEMES = ("http", "https")


class RedirectRefused(Exception):
    """A redirect to a scheme other than http(s): `url` redirected to `target` (both as
    given: the caller redacts them for its message)."""

    def __init__(self, url: str, target: str) -> None:
        super().__init__("redirect refused: only http and https are followed")
        self.url, self.target = url, target


class _SafeRedirects(urllib.request.HTTPRedirectHandler):
    # The base class refuses most schemes but follows ftp://; we follow only http(s).
    def http_error_302(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> Any:
        location = headers.get("location") or headers.get("uri")
        if location:
            target = urllib.parse.urljoin(req.full_url, location)
            if urllib.parse.urlsplit(target).scheme not in _SCHEMES:
                raise RedirectRefused(req.full_url, target)
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def safe_opener() -> urllib.request.OpenerDirector:
    """An opener for http(s) only: no file:, ftp: or data: handler, redirects to http(s) only."""
    # Built by hand so no file:, ftp: or data: handler is ever present.
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _SafeRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener
