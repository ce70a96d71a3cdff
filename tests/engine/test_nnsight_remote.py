"""A remote step that fails leaves the session as it was, says so in one sentence, and the API key it
sent never appears in that sentence, a session file, an export or the log.

NDIF cannot be reached from here: a stand-in server on 127.0.0.1 refuses (401), fails (503) or says
nothing, and a port with nothing behind it refuses the connection. The steps before the failure run
through nnsight's serialized request run here (``simulate=True``), the remote path without a network.
"""

from __future__ import annotations

import http.server
import json
import logging
import socket
import threading

import numpy as np
import pytest

pytest.importorskip("nnsight")

from engine import SamplingSettings, Session, load_model
from engine.random_model import TINY, write_random_model
from engine.runtime import Runtime

KEY = "nt-test-key-5f1e9c"


class StandIn(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``status`` (a JSON ``detail`` as NDIF's FastAPI does), or with
    nothing at all when ``status`` is 0; keeps each request's headers."""

    status = 401
    seen: list = []

    def _answer(self):
        type(self).seen.append(dict(self.headers))
        if not self.status:
            threading.Event().wait(5)  # silent until the client gives up
            return
        body = json.dumps({"detail": "Invalid API key" if self.status == 401 else "Service unavailable"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def stand_in():
    servers = []

    def start(status: int) -> str:
        handler = type("Handler", (StandIn,), {"status": status, "seen": []})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append((server, handler))
        return f"http://127.0.0.1:{server.server_address[1]}", handler

    yield start
    for server, _ in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp("remote") / "llama", "llama", seed=5, **TINY["llama"])
    return load_model(str(folder), runtime=Runtime(device="cpu", backend="nnsight"))


@pytest.fixture(autouse=True)
def hub_id(local, monkeypatch):
    """nnsight names a remote model by asking the hub for its canonical id (cached per process): the
    answer is given here, as the hub is not reachable."""
    from nnsight.modeling import huggingface

    monkeypatch.setitem(huggingface._ID_CACHE, local.backend.lm.repo_id, "example/tiny-llama")


def two_steps_then(local, host: str) -> tuple[Session, object]:
    """A session that took the prefill and one decode step through the serialized request, then
    sends its steps to ``host``."""
    from engine.loading import LoadedModel
    from engine.nnsight_backend import NnsightBackend

    loaded = LoadedModel(model=local.model, tokenizer=local.tokenizer, info=local.info,
                         backend=NnsightBackend(local.backend.lm, simulate=True))
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt("The database stores each row")
    session.step()
    session.step()
    session.projection  # fitted at the load, as the window does, before the server goes away
    loaded.backend = NnsightBackend(local.backend.lm, host)
    return session, loaded


def snapshot(session: Session):
    return (session.token_ids().tolist(), session.n_steps, session.node, len(session.branches().nodes) if hasattr(session.branches(), "nodes") else None,
            session.trace().record.logits.copy())


def assert_unchanged(before, after):
    assert before[:4] == after[:4]
    np.testing.assert_array_equal(before[4], after[4])


@pytest.mark.parametrize("status, why", [(401, "Invalid API key"), (503, "503")])
def test_a_refused_or_failing_step_is_one_sentence_and_loses_nothing(local, stand_in, monkeypatch, status, why):
    from engine.nnsight_backend import RemoteStepError

    monkeypatch.setenv("NDIF_API_KEY", KEY)
    host, handler = stand_in(status)
    session, _ = two_steps_then(local, host)
    before = snapshot(session)
    with pytest.raises(RemoteStepError) as caught:
        session.step()
    message = str(caught.value)
    assert message.startswith(f"The step could not run on {host}:") and message.endswith("The session is as it was before the step.")
    assert why in message
    assert_unchanged(before, snapshot(session))
    assert handler.seen, "the request reached the stand-in"


def test_a_server_that_says_nothing_times_out(local, stand_in, monkeypatch):
    from engine import nnsight_backend
    from engine.nnsight_backend import RemoteStepError

    monkeypatch.setattr(nnsight_backend, "REMOTE_TIMEOUT_S", 0.5)
    host, _ = stand_in(0)
    session, _ = two_steps_then(local, host)
    before = snapshot(session)
    with pytest.raises(RemoteStepError, match="no answer within"):
        session.step()
    assert_unchanged(before, snapshot(session))


def test_nothing_listening_refuses_the_connection(local):
    from engine.nnsight_backend import RemoteStepError

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    session, _ = two_steps_then(local, f"http://127.0.0.1:{port}")
    before = snapshot(session)
    with pytest.raises(RemoteStepError, match="refused"):
        session.step()
    assert_unchanged(before, snapshot(session))


def test_the_api_key_reaches_the_server_and_nowhere_else(local, stand_in, monkeypatch, tmp_path, caplog, capfd):
    from engine.nnsight_backend import RemoteStepError
    from engine.session_write import save_session

    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("NDIF_API_KEY", KEY)
    host, handler = stand_in(401)
    session, _ = two_steps_then(local, host)
    with pytest.raises(RemoteStepError) as caught:
        session.step()
    assert any(headers.get("ndif-api-key") == KEY for headers in handler.seen)  # nnsight sent it
    saved = save_session(session, tmp_path / "session.npz")
    exported = save_session(session, tmp_path / "export.npz", inside=True)
    out, err = capfd.readouterr()
    places = {"message": str(caught.value), "log": caplog.text, "stdout": out, "stderr": err,
              "session file": saved.read_bytes(), "export": exported.read_bytes()}
    for arrays in (np.load(saved), np.load(exported)):
        places |= {f"key {k}": arrays[k].tobytes() for k in arrays.files}
    for place, text in places.items():
        assert (KEY.encode() if isinstance(text, bytes) else KEY) not in text, place


def test_a_remote_model_is_named_by_hub_id_and_only_its_config_and_tokenizer_are_fetched(local, stand_in, monkeypatch, tmp_path):
    """From a stand-in hub (tests/hub_server.py): the architecture is built on the meta device, no
    weights file is asked for, and a step goes to the server (here one that is unavailable)."""
    from nnsight.modeling import huggingface

    from engine.nnsight_backend import RemoteStepError
    from tests.hub_server import FakeHub, point_client_at

    repo = "someone/tiny-llama"
    with FakeHub.from_folder(repo, __import__("pathlib").Path(local.info.source)) as hub:
        point_client_at(monkeypatch, hub.endpoint, tmp_path / "hf-home" / "hub")
        monkeypatch.setitem(huggingface._ID_CACHE, repo, repo)  # nnsight's model_info lookup (not served)
        server, _ = stand_in(503)
        loaded = load_model(repo, runtime=Runtime(backend="nnsight", host=server))
        asked = {r.path.rsplit("/", 1)[-1] for r in hub.requests if "/resolve/" in r.path}
    assert not any(name.endswith(".safetensors") for name in asked), asked
    assert "config.json" in asked
    info = loaded.info
    assert (info.device, info.remote_host, info.backend, info.family) == ("meta", server, "nnsight", "Llama")
    assert info.runs_on.startswith(f"{server} through nnsight")
    assert loaded.weights_hash == f"hub:{repo}"
    session = Session(loaded, SamplingSettings(greedy=True))
    assert not session.use_cache  # a remote step keeps no cache
    session.set_prompt("The database stores each row")
    with pytest.raises(RemoteStepError, match="503"):
        session.step()
    assert session.n_steps == 0
    with pytest.raises(RemoteStepError, match=f"The PCA basis of the token embeddings could not be computed on {server}: "):
        loaded.projection  # computed on the server, where the weights are
