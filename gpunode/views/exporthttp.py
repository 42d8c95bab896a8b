"""`gpunode exporter`'s HTTP side: the fleet's metrics, one host's, and the host list for
Prometheus's HTTP service discovery.

  /metrics               every host (a simple setup: one target for the whole fleet)
  /metrics?target=HOST   one host, the multi-target way (as blackbox_exporter's /probe):
                         with the relabeling in docs/monitoring.md, `instance` is the host
  /targets (or /sd)      http_sd_config JSON: one target per host

A target must be one of the inventory's selected hosts, by its exact name: anything else is
a 404 naming the parameter, never a lookup or a connection. Only GET and HEAD are served.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client.registry import CollectorRegistry

from gpunode.views.exporter import FleetCollector, exposition, registry_for, service_discovery

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ExporterServer:
    """Serves `collector` on `address` from a thread of its own until `shutdown`."""

    def __init__(self, collector: FleetCollector, address: tuple[str, int]) -> None:
        self.collector = collector
        self._all = registry_for(collector)
        self._one: dict[str, CollectorRegistry] = {
            h: registry_for(collector.for_target(h)) for h in collector.hosts
        }
        host, port = address
        server_class = _server_for(host)
        self.httpd = server_class((host, port), _handler(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def respond(self, raw_path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of `raw_path`."""
        url = urlsplit(raw_path)
        query = parse_qs(url.query, keep_blank_values=True)
        if url.path in ("/metrics", "/metrics/"):
            targets = query.get("target")
            if targets is None:
                return 200, CONTENT_TYPE, exposition(self._all)
            if len(targets) != 1 or targets[0] not in self._one:
                known = ", ".join(self.collector.hosts)
                return _text(404, f"target: not a host of this exporter's inventory ({known})\n")
            return 200, CONTENT_TYPE, exposition(self._one[targets[0]])
        if url.path in ("/targets", "/sd"):
            body = service_discovery(self.collector.hosts, self.collector.label)
            return 200, "application/json", json.dumps(body).encode()
        if url.path == "/":
            return _text(200, "gpunode exporter: /metrics, /metrics?target=HOST, /targets\n")
        return _text(404, "not found: /metrics, /metrics?target=HOST, /targets\n")


def _text(status: int, text: str) -> tuple[int, str, bytes]:
    return status, "text/plain; charset=utf-8", text.encode()


def _server_for(host: str) -> type[ThreadingHTTPServer]:
    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    return Server


def _handler(server: ExporterServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._send(head=False)

        def do_HEAD(self) -> None:
            self._send(head=True)

        def _send(self, *, head: bool) -> None:
            status, ctype, body = server.respond(self.path)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # a scrape every few seconds is no news

    return Handler
