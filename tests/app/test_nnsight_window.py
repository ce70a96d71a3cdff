"""``nexttoken --backend nnsight --model <random Llama folder> --steps 5`` steps in the window: a real
run of ``main`` in a child process (the engine in its own process, as by default), offscreen; the
Model menu and the model label say where the model runs and what records its steps."""

from __future__ import annotations

import pytest

pytest.importorskip("nnsight")

from engine.random_model import TINY, write_random_model

from .helpers import run_main_in_child

REPORT = """
seen.update(
    backend=result.info.backend, steps=len(result.records), runs_on=window.commands.runs_on_action.text(),
    nnsight_ticked=window.commands.nnsight_action.isChecked(), tooltip=window.status_line.model_label.toolTip(),
    runtime=window.controller.runtime.backend,
)
"""


@pytest.mark.slow  # over 5 s (a whole app run)
def test_the_nnsight_backend_steps_in_the_window(tmp_path):
    folder = write_random_model(tmp_path / "tiny-llama", "llama", seed=3, **TINY["llama"])
    argv = ["--backend", "nnsight", "--model", str(folder), "--steps", "5", "--prompt", "The database stores",
            "--size", "1280x720", "--screenshot", str(tmp_path / "shot.png")]
    seen = run_main_in_child(tmp_path, argv, REPORT)
    assert seen["code"] == 0, seen
    assert seen["backend"] == seen["runtime"] == "nnsight", seen  # the engine process loaded it through nnsight
    assert seen["steps"] == 5, seen
    assert seen["runs_on"] == "Runs on: cpu, float32, nnsight's tracing", seen
    assert seen["nnsight_ticked"] is True
    assert "runs on cpu, float32, nnsight's tracing" in seen["tooltip"]


def test_the_window_refuses_a_remote_run_without_the_nnsight_backend(capsys):
    from app.window.main import main

    assert main(["--remote", "--model", "meta-llama/Llama-3.1-70B"]) == 2
    assert "need --backend nnsight" in capsys.readouterr().err


def test_a_remote_step_that_fails_is_the_status_line_and_the_window_keeps_its_steps(make_window, qtbot, tmp_path, monkeypatch):
    """A model whose steps go to a server (the thread engine, its first step through nnsight's
    serialized request run here): the step's sentence and the KV cache panel say where it ran; then
    the server answers 503, and the status line says so in the error style while the window keeps
    every step it had."""
    from dataclasses import replace

    from app.protocol import messages as p
    from engine import load_model
    from engine.loading import LoadedModel
    from engine.nnsight_backend import NnsightBackend
    from engine.runtime import Runtime
    from tests.app.helpers import run
    from tests.engine.test_nnsight_remote import StandIn

    import http.server
    import threading

    local = load_model(str(write_random_model(tmp_path / "llama", "llama", seed=3, **TINY["llama"])),
                       runtime=Runtime(device="cpu", backend="nnsight"))
    handler = type("Handler", (StandIn,), {"status": 503, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"http://127.0.0.1:{server.server_address[1]}"
    from nnsight.modeling import huggingface

    monkeypatch.setitem(huggingface._ID_CACHE, local.backend.lm.repo_id, "example/tiny-llama")  # the hub's answer
    try:
        remote = LoadedModel(model=local.model, tokenizer=local.tokenizer, info=replace(local.info, remote_host=host),
                             backend=NnsightBackend(local.backend.lm, simulate=True))
        window = make_window()
        run(qtbot, window, lambda: window.load_model(None, loaded=remote, prompt="The database stores"), p.Load)
        run(qtbot, window, window.step, p.Step)
        assert f"It ran on {host}: a full forward pass over the text so far" in window.status_line.status_label.text()
        assert window.kv.bytes_label.text().startswith(f"No KV cache: each step is one request to {host}")
        remote.backend = NnsightBackend(local.backend.lm, host)  # the server now fails
        before = window.state.result
        with qtbot.waitSignal(window.errorShown, timeout=20_000) as shown:
            window.step()
        assert shown.args[0] == window.status_line.status_label.text()
        assert shown.args[0].startswith(f"The step could not run on {host}: the server answered 503")
        assert shown.args[0].endswith("The session is as it was before the step.")
        qtbot.wait(100)
        assert window.state.result is before and len(before.records) == 1
    finally:
        server.shutdown()
        server.server_close()


def test_the_model_menu_switches_the_backend_and_a_failed_switch_keeps_the_model_and_its_tick(window, qtbot, monkeypatch):
    from app.protocol import messages as p
    from tests.app.helpers import run

    commands = window.commands
    assert commands.runs_on_action.text() == "Runs on: cpu, float32, forward hooks"
    result = run(qtbot, window, lambda: commands.nnsight_action.trigger(), p.Load)
    assert result.info.backend == "nnsight" and commands.nnsight_action.isChecked()
    assert commands.runs_on_action.text() == "Runs on: cpu, float32, nnsight's tracing"
    run(qtbot, window, lambda: commands.nnsight_action.trigger(), p.Load)  # back to forward hooks
    assert window.state.result.info.backend == "hooks"
    monkeypatch.setitem(__import__("sys").modules, "engine.nnsight_backend", None)  # as if nnsight were not installed
    with qtbot.waitSignal(window.errorShown, timeout=20_000) as shown:
        commands.nnsight_action.trigger()
    assert "needs the nnsight package" in shown.args[0]
    assert not commands.nnsight_action.isChecked() and window.controller.runtime.backend == "hooks"
    assert window.state.result.info.backend == "hooks"
