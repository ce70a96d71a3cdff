"""A stand-in for the Hugging Face hub on 127.0.0.1, for the download tests.

It answers what huggingface_hub 2.4's ``snapshot_download`` asks for (read from its source:
_snapshot_download.py, file_download.py, hf_api.py), for one model repository held in memory:

- ``GET /api/models/{repo}/revision/{rev}``: the model info; only ``sha`` (the commit) is used.
- ``GET /api/models/{repo}/tree/{rev}?recursive=True``: every file with its size and git ``oid``,
  plus ``lfs`` (sha256, size) for LFS files. One page: no ``Link`` header.
- ``HEAD /{repo}/resolve/{rev}/{file}``: ``X-Repo-Commit`` and ``ETag``/``Content-Length``. An LFS
  file redirects (302) to a CDN host, as the hub does, with ``X-Linked-Etag``/``X-Linked-Size``;
  the CDN here is the same server reached as ``localhost``, which huggingface_hub treats as
  another host (so it does not follow the redirect on HEAD, and GETs the CDN address).
- ``GET`` of a file, from the hub or the CDN: its bytes; ``Range: bytes=N-`` answers 206 from N.

No ``X-Xet-Hash`` header and no ``xetHash`` in the tree: huggingface_hub then never tries hf_xet and
downloads over plain HTTP. An unknown repository answers 401 with ``X-Error-Code: RepoNotFound``
and an unknown file 404 with ``EntryNotFound``, as the hub does; anything else (huggingface_hub
also asks for ``/api/agent-harnesses`` once) is a plain 404.

Faults for the tests: ``drop_once[name] = n`` sends the first GET of ``name`` only ``n`` bytes
(with the full Content-Length) and closes the connection; ``announce[name] = n`` makes the hub's
HEAD give ``n`` as the size of a file whose GET then sends all of it; ``hold_at[name] = n`` pauses
a GET of ``name`` after ``n`` bytes until ``release`` is set (at most ``HOLD_S`` seconds).
``requests`` logs every request.
The server runs on a daemon thread, answers one request per connection (HTTP/1.0, so nothing
lingers on a kept-alive socket once it stops), gives up on a silent client after a few seconds,
and stops itself after ``lifetime_s`` even if a test never calls ``stop``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_PATTERNS = ("*.safetensors", "*.bin", "*.msgpack", "*.h5", "*.ot", "*.onnx")
HOLD_S = 20.0  # the longest a held file waits for ``release``
CHUNK = 256 * 1024  # the client's read size in the tests (huggingface_hub reads 10 MiB at a time)


def point_client_at(monkeypatch, endpoint: str, cache: Path) -> None:
    """Make this process's huggingface_hub use ``endpoint`` and an empty ``cache``, online.

    huggingface_hub reads HF_ENDPOINT, HF_HUB_CACHE and HF_HUB_OFFLINE once, at import, into
    ``huggingface_hub.constants``; the functions a download calls read those attributes at call
    time, so patching them is what setting the variables before the import does.
    """
    constants = "huggingface_hub.constants"
    monkeypatch.setattr(f"{constants}.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(f"{constants}.AGENT_HARNESSES_PATH", str(cache.parent / "agent_harnesses.json"))
    monkeypatch.setattr(f"{constants}.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(f"{constants}.DOWNLOAD_CHUNK_SIZE", CHUNK)  # many progress reports per file
    monkeypatch.setattr(f"{constants}.ENDPOINT", endpoint)
    template = endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    monkeypatch.setattr(f"{constants}.HUGGINGFACE_CO_URL_TEMPLATE", template)


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file, which the hub uses as a regular file's ETag."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Request:
    """One request as the server saw it (``range``: the Range header, if any)."""

    method: str
    path: str
    range: str | None


@dataclass
class FakeHub:
    """One model repository served over HTTP like the hub serves it (see the module docstring)."""

    repo_id: str
    files: dict[str, bytes]
    lifetime_s: float = 120.0
    drop_once: dict[str, int] = field(default_factory=dict)
    announce: dict[str, int] = field(default_factory=dict)
    hold_at: dict[str, int] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self):
        self._new_commit()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Timer | None = None

    @classmethod
    def from_folder(cls, repo_id: str, folder: Path, extra: dict[str, bytes] | None = None, **kw) -> "FakeHub":
        files = {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}
        return cls(repo_id, {**files, **(extra or {})}, **kw)

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not running"
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeHub":
        hub = self

        class Handler(_HubHandler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._watchdog = threading.Timer(self.lifetime_s, self.stop)  # a forgotten server stops itself
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def stop(self) -> None:
        """Stop serving: afterwards a connection to the port is refused."""
        server, self._server = self._server, None
        if server is None:
            return
        if self._watchdog is not None and threading.current_thread() is not self._watchdog:
            self._watchdog.cancel()
        self.release.set()  # a held file finishes, so its thread ends
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ what it serves
    def _new_commit(self) -> None:
        ids = sorted((name, git_blob_sha1(data)) for name, data in self.files.items())
        self.commit = hashlib.sha1(repr(ids).encode()).hexdigest()

    def push(self, name: str, data: bytes) -> None:
        """Replace one file, as a new commit on ``main``."""
        with self._lock:
            self.files[name] = data
            self._new_commit()

    def is_lfs(self, name: str) -> bool:
        return any(fnmatch.fnmatch(name, p) for p in LFS_PATTERNS)

    def etag(self, name: str) -> str:
        data = self.files[name]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(name) else git_blob_sha1(data)

    def tree(self) -> list[dict]:
        entries = []
        for name, data in self.files.items():
            entry = {"type": "file", "path": name, "size": len(data), "oid": git_blob_sha1(data)}
            if self.is_lfs(name):
                entry["lfs"] = {"oid": self.etag(name), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        return entries

    def gets(self, name: str) -> list[Request]:
        """The GET requests for one file (through the hub or the CDN)."""
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + name)]

    def log(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def take_drop(self, name: str) -> int | None:
        with self._lock:
            return self.drop_once.pop(name, None)


class _HubHandler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.0"  # one request per connection
    timeout = 5  # seconds a silent client may hold a connection

    def log_message(self, format, *args):  # keep test output clean
        pass

    def do_HEAD(self):
        self._answer(body=False)

    def do_GET(self):
        self._answer(body=True)

    # ------------------------------------------------------------------
    def _answer(self, body: bool) -> None:
        hub = self.hub
        path = unquote(urlsplit(self.path).path)
        hub.log(Request(self.command, path, self.headers.get("Range")))
        host = (self.headers.get("Host") or "").split(":")[0]
        try:
            if m := re.fullmatch(rf"/api/models/(.+?)/revision/([^/]+)", path):
                if m[1] != hub.repo_id:
                    return self._repo_not_found()
                siblings = [{"rfilename": name} for name in hub.files]
                return self._json({"id": hub.repo_id, "sha": hub.commit, "siblings": siblings, "private": False})
            if m := re.fullmatch(rf"/api/models/(.+?)/tree/([^/]+)", path):
                if m[1] != hub.repo_id:
                    return self._repo_not_found()
                return self._json(hub.tree())
            if m := re.fullmatch(rf"/cdn/([0-9a-f]{{64}})/(.+)", path):
                if host != "localhost" or m[2] not in hub.files or hub.etag(m[2]) != m[1]:
                    return self._error(404, "EntryNotFound")
                return self._file(m[2], body, cdn=True)
            if m := re.fullmatch(rf"/(.+?)/resolve/([^/]+)/(.+)", path):
                if m[1] != hub.repo_id:
                    return self._repo_not_found()
                if m[2] not in ("main", hub.commit):
                    return self._error(404, "RevisionNotFound")
                if m[3] not in hub.files:
                    return self._error(404, "EntryNotFound")
                return self._file(m[3], body, cdn=False)
            return self._error(404, None)
        except (BrokenPipeError, ConnectionResetError):  # the client went away (a cancelled download)
            self.close_connection = True

    def _file(self, name: str, body: bool, cdn: bool) -> None:
        hub = self.hub
        data = hub.files[name]
        if hub.is_lfs(name) and not cdn:  # the hub hands LFS files to its CDN
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{hub.port}/cdn/{hub.etag(name)}/{name}")
            self.send_header("X-Repo-Commit", hub.commit)
            self.send_header("X-Linked-Etag", f'"{hub.etag(name)}"')
            self.send_header("X-Linked-Size", str(hub.announce.get(name, len(data))))
            self.send_header("ETag", f'"{git_blob_sha1(data)}"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = 0
        if body and (m := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")):
            start = int(m[1])
        if start > len(data):
            return self._error(416, None)
        self.send_response(206 if start else 200)
        self.send_header("ETag", f'"{hub.etag(name)}"')
        if not cdn:
            self.send_header("X-Repo-Commit", hub.commit)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if not body:
            return
        drop = hub.take_drop(name)
        if drop is not None:  # the connection breaks part-way through the file
            self.wfile.write(data[start : start + drop])
            self.wfile.flush()
            self.close_connection = True
            return
        hold = hub.hold_at.get(name)
        for i in range(start, len(data), 1 << 16):
            if hold is not None and i >= hold:
                self.wfile.flush()
                hub.release.wait(HOLD_S)
                hold = None
            self.wfile.write(data[i : i + (1 << 16)])

    def _json(self, value) -> None:
        payload = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _repo_not_found(self) -> None:
        self._error(401, "RepoNotFound")

    def _error(self, status: int, code: str | None) -> None:
        payload = json.dumps({"error": code or "not found"}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        if code in ("EntryNotFound", "RevisionNotFound"):
            self.send_header("X-Repo-Commit", self.hub.commit)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)
