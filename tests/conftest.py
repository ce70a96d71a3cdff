"""Shared fixtures: offscreen Qt, no network, the bundled demo model and tiny random GPT-2 folders."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"  # nothing in the suite reaches a network
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# One torch (OpenMP) thread per test process, set before torch is imported: the fast run's two workers
# would otherwise run four threads on two cores, and torch's thread teams spin waiting for each other
# (the engine tests took 45 % less CPU with one, measured side by side). Engine processes and threads
# set their own count (app/host/torch_threads.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from engine import paths

DEMO_DIR = paths.demo_model_dir()
SLOW_BUDGET = 50  # tests marked slow (left out of ./scripts/test.sh): make tests cheaper rather than mark more


# Garbage is collected between tests only. A window a test closed is cyclic garbage full of Qt
# objects; collected whenever Python chose, once inside PySide's disconnect (which holds Qt's signal
# lock) a QAction's destructor waited for that same lock for ever (seen: a worker hung), and in a test
# whose engine is a thread, Python may choose that thread. Between tests nothing else runs.
# With automatic collection off, everything a test allocated is still in the youngest generation
# when it ends: collecting that one finds the test's garbage (its window, its session) without
# walking the heap of torch, transformers and Qt that earlier tests left (a whole collection after
# every test was a fifth of the fast run's CPU). What outlives its test (a module's shared window or
# model) is collected with the next generation after its module, and what is still alive then is
# frozen: no later collection walks it again (collecting after each module, and the whole heap after
# every tenth, was 4 % of the run's CPU samples). Frozen objects are still freed when nothing refers
# to them; only a cycle among them that dies later (a session fixture's) is kept.
gc.disable()


@pytest.fixture(autouse=True)
def collect_garbage_after_the_test():
    yield
    gc.collect(0)


@pytest.fixture(autouse=True, scope="module")
def collect_garbage_after_the_module():
    yield
    gc.collect(1)
    gc.freeze()


@pytest.hookimpl(tryfirst=True)  # before -m deselects them
def pytest_collection_modifyitems(config, items):
    slow = [item.nodeid for item in items if item.get_closest_marker("slow")]
    if len(slow) > SLOW_BUDGET:
        raise pytest.UsageError(f"{len(slow)} tests are marked slow, more than {SLOW_BUDGET}: make one cheaper instead")


@pytest.fixture(scope="session")
def demo_model():
    """The bundled demo model, loaded once for the whole run (read-only: do not mutate it)."""
    from engine import load_model

    return load_model()


TINY = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64, vocab_size=50257)


def make_tiny_folder(folder: Path, seed: int = 0, **config) -> Path:
    """Write a random GPT-2 (2 layers, 2 heads, d=32, 64 positions) with the real tokenizer."""
    from engine.random_model import write_random_gpt2

    return write_random_gpt2(folder, seed, **(TINY | config))


FAMILY_PROMPT = "The database stores each row of a table"


def stepped_family_session(family: str, tmp_path_factory):
    """(folder, session) of a tiny random model of ``family`` (engine.random_model.TINY), greedy,
    after the prefill of FAMILY_PROMPT and two decode steps."""
    from engine import SamplingSettings, Session, load_model
    from engine.random_model import TINY as TINY_FAMILIES, write_random_model

    folder = write_random_model(tmp_path_factory.mktemp(family) / family, family, seed=2, **TINY_FAMILIES[family])
    session = Session(load_model(str(folder)), SamplingSettings(greedy=True))
    session.set_prompt(FAMILY_PROMPT)
    for _ in range(3):
        session.step()
    return folder, session


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """A folder holding a tiny random GPT-2 (see make_tiny_folder)."""
    return make_tiny_folder(tmp_path_factory.mktemp("tiny") / "tiny-gpt2")


@pytest.fixture(scope="session")
def tiny_model(tiny_dir):
    from engine import load_model

    return load_model(str(tiny_dir))


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
