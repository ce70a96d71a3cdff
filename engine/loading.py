"""Load a checkpoint of a supported family (engine.families) from a local folder or a Hugging Face hub id.

``load_model`` checks what it can before transformers sees the files, so that each failure becomes
one ModelLoadError sentence: folder missing, not a model folder, not a supported family, weights truncated or
corrupt, tokenizer missing or not matching the model, hub id offline and not cached.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import struct
import threading
from pathlib import Path
from typing import Callable

import torch

from . import chat, devices, families, paths
from .architecture import describe
from .defaults import read_generation_config
from .errors import ModelLoadError
from .info import ModelInfo
from .loaded_model import LoadedModel
from .quiet import silence_libraries
from .runtime import CPU, Runtime
from .session import warm_up
from .step_backend import HooksBackend, StepBackend
from .tokens import Tokenizer

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)

# What a hub download fetches: the `gpt2` repository also holds TF, Flax, ONNX and Rust weights.
HUB_FILES = [
    "config.json",
    "generation_config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "chat_template.jinja",  # newer instruct repositories keep the chat template here
]
TOKENIZER_ANY_OF = ("tokenizer.json", "vocab.json")  # a folder with neither has no tokenizer


def looks_like_path(source: str) -> bool:
    """True for an existing path or anything written like one; ``gpt2`` and ``org/name`` are hub ids."""
    if Path(source).expanduser().exists():
        return True
    windows_drive = len(source) > 1 and source[1] == ":"
    return source.startswith((".", "~", "/")) or "\\" in source or windows_drive or source.count("/") > 1


def load_model(
    source: str | os.PathLike | None = None,
    *,
    progress: ProgressCallback | None = None,
    runtime: Runtime | None = None,
) -> LoadedModel:
    """Load a model: None for the bundled demo, a folder path, or a name such as ``gpt2``.

    A name is looked up first among the models bundled in resources/models/ (so a classroom build
    with GPT-2 small inside works offline), then in the Hugging Face cache, then downloaded.
    ``runtime`` (engine.runtime; default: the CPU in float32, forward hooks) says on which device, in which dtype and through which backend;
    a remote one loads no weights (engine.remote_model).
    """
    runtime = runtime or CPU
    if runtime.is_remote:
        return load_remote(source, runtime)
    if source is None:
        folder, name, is_demo = paths.demo_model_dir(), paths.DEMO_MODEL_NAME, True
    elif looks_like_path(str(source)):
        folder = Path(source).expanduser()
        name, is_demo = folder.name, folder.resolve() == paths.demo_model_dir().resolve()
    elif (bundled := bundled_model(str(source))) is not None:
        folder, name, is_demo = bundled, str(source), bundled == paths.demo_model_dir()
    else:
        folder, name, is_demo = resolve_hub_id(str(source), progress), str(source), False
    return load_folder(folder, name=name, is_demo=is_demo, runtime=runtime)


def load_remote(source: str | None, runtime: Runtime) -> LoadedModel:
    """A model whose steps run on ``runtime.remote_host`` (engine.remote_model): named by its hub id,
    only its config and tokenizer here. No warm-up: each pass would be a request to the server."""
    if source is None or looks_like_path(str(source)):
        raise ModelLoadError(
            f"--remote needs a hub id such as meta-llama/Llama-3.1-70B (got {source or 'the bundled demo'}): "
            "the server loads the weights by name; a local weights folder cannot be sent."
        )
    from .remote_model import remote_parts

    model, tokenizer, info, backend = remote_parts(str(source), runtime)
    check_tokenizer(tokenizer, model.config, Path(str(source)))
    return LoadedModel(model=model, tokenizer=tokenizer, info=info, backend=backend)


def bundled_model(name: str) -> Path | None:
    """The folder shipped in resources/models/ under ``name`` (a classroom build's ``gpt2``), if any."""
    return next((d for d in paths.bundled_model_dirs() if d.name == name), None)


def load_folder(folder: Path, *, name: str | None = None, is_demo: bool = False, runtime: Runtime | None = None) -> LoadedModel:
    """Load a Hugging Face model folder of a supported family after checking its files."""
    from .devices import resolve

    runtime = runtime or CPU
    device, dtype = resolve(runtime.device, runtime.dtype)  # before the weights: a refused device costs nothing
    folder = Path(folder)
    name = name or folder.name
    config = check_folder(folder)
    from transformers import AutoModelForCausalLM

    silence_libraries()
    check_weights_fit_config(folder)  # before anything is allocated: a wrong config can describe a huge model
    try:
        model, loading_info = AutoModelForCausalLM.from_pretrained(
            folder,
            attn_implementation="eager",  # attention weights are only returned by the eager path
            dtype=dtype,
            local_files_only=True,
            output_loading_info=True,
        )
    except Exception as exc:  # transformers raises many kinds; all mean the same thing to a person
        raise ModelLoadError(f"The weights in {folder} could not be read ({_first_line(exc)}).") from exc
    missing = [k for k in loading_info.get("missing_keys", []) if not k.endswith(("attn.bias", "masked_bias"))]
    missing = [k for k in missing if not (k == "lm_head.weight" and config.get("tie_word_embeddings", True))]
    if missing:
        raise ModelLoadError(
            f"The weights in {folder} are incomplete: {len(missing)} tensors are missing "
            f"(for example {missing[0]}). The download may have been interrupted."
        )
    if not all_finite(model.parameters()):
        raise ModelLoadError(f"The weights in {folder} hold NaN or infinite values: the file is corrupt.")
    return wrap_model(model.to(device), folder, name=name, is_demo=is_demo, backend=runtime.backend)


def all_finite(tensors) -> bool:
    """No NaN or infinity in any of ``tensors``. A NaN or an infinity makes a tensor's sum non-finite,
    so one sum in the tensor's own dtype answers for almost every tensor; only a non-finite sum is
    looked at element by element, since finite values whose sum overflows (float32's largest, twice)
    are no fault. torch.isfinite(...).all() on every tensor took 6-15 s for SmolLM2's 135M parameters
    on 2 cores, every start; sums in float64 about 1.5-2.7 s on 2 loaded cores, these 0.6 s."""
    return all(bool(torch.isfinite(t.sum())) or bool(torch.isfinite(t).all()) for t in tensors)


def wrap_model(model, folder: Path, *, name: str, is_demo: bool = False, backend: str = "hooks") -> LoadedModel:
    """A loaded transformers model (eager attention) with the tokenizer in ``folder``, checked, and its info;
    ``backend`` ("hooks" or "nnsight", engine.runtime.BACKENDS) records its steps."""
    from transformers import AutoTokenizer

    model.eval()
    try:
        hf_tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as exc:
        raise ModelLoadError(f"The tokenizer in {folder} could not be read ({_first_line(exc)}).") from exc
    tokenizer = Tokenizer(hf_tokenizer)
    cfg = model.config
    check_tokenizer(tokenizer, cfg, folder)
    n_head = cfg.num_attention_heads
    total, active = families.parameter_counts(model)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or n_head
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    info = ModelInfo(
        name=name,
        source=str(folder),
        n_layer=cfg.num_hidden_layers,
        n_head=n_head,
        d_model=cfg.hidden_size,
        n_positions=cfg.max_position_embeddings,
        vocab_size=cfg.vocab_size,
        n_params=total,
        is_demo=is_demo,
        n_active_params=0 if active == total else active,  # 0: the defaults, as a session file reopens GPT-2
        family=families.family_of(model).name,
        n_kv_heads=0 if kv_heads == n_head else kv_heads,
        d_head=0 if d_head == cfg.hidden_size // n_head else d_head,
        chat_template=chat.has_chat_template(tokenizer),
        special_ids=chat.special_ids(tokenizer),
        backend=backend,
        **devices.describe(model),
        generation=read_generation_config(folder),
        architecture=describe(model, tokenizer),
    )
    loaded = LoadedModel(model=model, tokenizer=tokenizer, info=info, backend=step_backend(backend, model, hf_tokenizer))
    warm_up(loaded)  # the first step a person takes is then timed as itself
    return loaded


def step_backend(name: str, model, hf_tokenizer) -> StepBackend:
    """The backend that records the steps of a local ``model``."""
    if name == "hooks":
        return HooksBackend()
    try:
        from .nnsight_backend import NnsightBackend
    except ImportError as exc:
        raise ModelLoadError(f"--backend nnsight needs the nnsight package ({exc}): pip install 'nexttoken[nnsight]'.") from exc
    return NnsightBackend.around(model, hf_tokenizer)


TOKENIZER_PROBE = "Hello, World! naïve 🐈 \t\n<|endoftext|> 42"
ASCII = "".join(map(chr, range(128)))


def check_tokenizer(tokenizer: Tokenizer, cfg, folder: Path) -> None:
    """Raise ModelLoadError if the tokenizer is not a byte-level BPE tokenizer for this model's vocabulary."""
    mismatch = f"The tokenizer in {folder} does not match the model"
    if tokenizer.vocab_size > cfg.vocab_size:
        raise ModelLoadError(
            f"{mismatch}: it has {tokenizer.vocab_size:,} tokens but the model's embedding has {cfg.vocab_size:,} rows."
        )
    if tokenizer.eos_id is None:
        raise ModelLoadError(f"{mismatch}: it has no end-of-text token.")
    model_eos = getattr(cfg, "eos_token_id", None)
    model_eos = [model_eos] if isinstance(model_eos, int) else list(model_eos or [])
    if model_eos and tokenizer.eos_id not in model_eos:
        raise ModelLoadError(
            f"{mismatch}: its {tokenizer.hf.eos_token} token is id {tokenizer.eos_id:,} but the model's is id "
            f"{model_eos[0]:,}, so the two come from different vocabularies."
        )
    back = tokenizer.decode(tokenizer.encode(TOKENIZER_PROBE))
    if back != TOKENIZER_PROBE:
        raise ModelLoadError(
            f"{mismatch}: it is not a GPT-2 byte-level tokenizer ({TOKENIZER_PROBE!r} comes back as {back!r})."
        )
    # Every ASCII character, the control ones too: those the vocabulary has no token for are left out
    # of a prompt (SmolLM2's six); the window names them whenever a prompt holds one (``Tokenizer.left_out``).
    lost = tokenizer.left_out(ASCII)
    kept = "".join(c for c in ASCII if c not in lost)
    back = tokenizer.decode(tokenizer.encode(ASCII))
    if back != kept:
        raise ModelLoadError(f"{mismatch}: ASCII text does not come back as it was ({kept!r} comes back as {back!r}).")
    if lost:
        log.info("the tokenizer in %s has no token for %s", folder, ", ".join(f"U+{ord(c):04X}" for c in lost))


def check_folder(folder: Path) -> dict:
    """Check a model folder's files before loading; return its config as a dict."""
    if not folder.exists():
        raise ModelLoadError(f"The model folder {folder} does not exist.")
    if not folder.is_dir():
        raise ModelLoadError(f"{folder} is a file, not a model folder.")
    config_path = folder / "config.json"
    if not config_path.exists():
        raise ModelLoadError(f"{folder} is not a Hugging Face model folder: it has no config.json.")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"The config.json in {folder} is not valid JSON ({exc}).") from exc
    if not isinstance(config, dict):
        raise ModelLoadError(f"The config.json in {folder} is not a JSON object.")
    model_type = config.get("model_type")
    if families.family_of_type(model_type) is None:
        raise ModelLoadError(f"{folder} holds a {model_type or 'unknown'} model; {families.SUPPORTED_SENTENCE}.")
    shards = sorted(folder.glob("*.safetensors"))
    if not shards and not (folder / "pytorch_model.bin").exists():
        raise ModelLoadError(f"{folder} has no weights (no .safetensors file).")
    for shard in shards:
        check_safetensors(shard)
    if not any((folder / f).exists() for f in TOKENIZER_ANY_OF):
        raise ModelLoadError(f"{folder} has no tokenizer (tokenizer.json or vocab.json + merges.txt).")
    return config


def check_weights_fit_config(folder: Path) -> None:
    """Refuse a folder whose config describes a model far larger than its safetensors files hold (a
    config that belongs to other weights would otherwise allocate that model first: GPT-2 weights
    under a Llama config ask for 6.7 B parameters). Counted on the meta device, so nothing is
    allocated. A few tensors missing is left to the load, which names them."""
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        return
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
        with torch.device("meta"):
            needed = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    except Exception as exc:  # a config transformers cannot build a model from
        raise ModelLoadError(f"The config.json in {folder} does not describe a model that can be built ({_first_line(exc)}).") from exc
    stored = sum(_stored_elements(shard) for shard in shards)
    if 2 * stored < needed:
        raise ModelLoadError(
            f"The config.json in {folder} describes a model of {needed:,} parameters, but its weights hold "
            f"{stored:,}: the config does not belong to these weights."
        )


def _stored_elements(path: Path) -> int:
    """How many numbers a (checked) safetensors file holds, from its header."""
    with open(path, "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__")


def check_safetensors(path: Path) -> None:
    """Raise ModelLoadError if a safetensors file is truncated or its header is damaged."""
    problem = safetensors_problem(path)
    if problem is not None:
        raise ModelLoadError(f"The weights file {path.name} {problem}. Download it again.")


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with a safetensors file, as the end of a sentence ("is truncated: ..."), or None."""
    try:
        size = path.stat().st_size
    except OSError as exc:  # e.g. a hub-cache link whose blob was never finished or was deleted
        return f"cannot be opened ({exc.strerror or exc})"
    try:
        with open(path, "rb") as f:
            header_len = struct.unpack("<Q", f.read(8))[0]
            if header_len <= 0 or 8 + header_len > size:
                raise ValueError("header length beyond the end of the file")
            header = json.loads(f.read(header_len))
        ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
    except (struct.error, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
        return f"is corrupt ({exc})"
    expected = 8 + header_len + max(ends, default=0)
    if size < expected:
        return f"is truncated: {size:,} bytes of {expected:,}"
    return None


def resolve_hub_id(repo_id: str, progress: ProgressCallback | None = None) -> Path:
    """A hub id's local snapshot folder: from the cache, else downloaded (only HUB_FILES).

    A weights file found damaged in the cache or in a download is removed from the cache, so that
    the next load downloads it again. An exception raised by ``progress`` (a closing window's
    Cancelled) stops the download and propagates unchanged; the files finished so far stay cached.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError

    partial = False  # an interrupted download left part of the files in the cache
    try:
        cached = Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except HFValidationError as exc:
        raise ModelLoadError(f"'{repo_id}' is neither an existing folder nor a valid model hub id.") from exc
    except (LocalEntryNotFoundError, FileNotFoundError, OSError) as exc:
        partial = getattr(exc, "snapshot_path", None) is not None  # huggingface_hub's IncompleteSnapshotError
    else:
        if not _remove_damaged_weights(cached) and _has_all_files(cached):
            return cached
        partial = True  # download below: it fetches what is missing or was removed
    interrupted = (
        f"'{repo_id}' was only partly downloaded (the download was interrupted) and the model hub cannot be "
        f"reached to finish it: connect to the internet and load '{repo_id}' again."
    )
    bar_class = _progress_bar_class(progress, repo_id)
    try:
        folder = Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, tqdm_class=bar_class))
    except RepositoryNotFoundError as exc:
        raise ModelLoadError(f"There is no folder called '{repo_id}' and the model hub has no such model.") from exc
    except Exception as exc:
        if exc in bar_class.raised:  # the progress callback stopped the download (a closing window)
            raise
        if not isinstance(exc, LocalEntryNotFoundError):  # the hub was reached: a broken line, a bad file
            reason = _first_line(exc).rstrip(".")
            raise ModelLoadError(
                f"Downloading '{repo_id}' stopped ({reason}); load it again to continue: the files already "
                "downloaded are kept."
            ) from exc
        if partial:
            raise ModelLoadError(interrupted) from exc
        raise ModelLoadError(
            f"'{repo_id}' is not in the local model cache and the model hub cannot be reached: connect to the "
            f"internet and load '{repo_id}' once (it is then cached), or download the model folder on another "
            "machine and open it as a local folder."
        ) from exc
    damaged = _remove_damaged_weights(folder)
    if damaged:
        name, problem = damaged[0]
        raise ModelLoadError(
            f"The weights file {name} that the model hub sent for '{repo_id}' {problem}; it was removed from "
            f"the cache, so loading '{repo_id}' again downloads it afresh."
        )
    if partial and not _has_all_files(folder):  # huggingface_hub 1.x returns the partial snapshot offline
        raise ModelLoadError(interrupted)
    return folder


def _has_all_files(folder: Path) -> bool:
    """True if a snapshot holds a config, weights and a tokenizer (whether they suit nexttoken is checked later)."""
    has_weights = any(folder.glob("*.safetensors")) or (folder / "pytorch_model.bin").exists()
    has_tokenizer = any((folder / f).exists() for f in TOKENIZER_ANY_OF)
    return (folder / "config.json").exists() and has_weights and has_tokenizer


def _remove_damaged_weights(folder: Path) -> list[tuple[str, str]]:
    """Remove truncated or corrupt .safetensors files from a hub-cache snapshot; return (name, problem) for each.

    In the cache a snapshot file is a link to a blob named by its hash: both go, or the hub client
    would link the damaged blob again instead of downloading it.
    """
    problems = []
    for shard in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(shard)
        if problem is not None:
            problems.append((shard.name, problem))
            blob = shard.resolve() if shard.is_symlink() else None
            shard.unlink(missing_ok=True)
            if blob is not None and blob.parent.name == "blobs":
                blob.unlink(missing_ok=True)
    return problems


def _bytes_to_fetch(repo_id: str) -> int:
    """Bytes of HUB_FILES a running snapshot_download still has to fetch, from the file list it cached; 0 if unknown.

    snapshot_download adds each file's size to its byte total only when that file starts, so small
    files finishing first would show 100 % and then fall back; this total is right from the start.
    """
    try:
        from huggingface_hub import get_cached_repo_tree, try_to_load_from_cache
        from huggingface_hub.utils import filter_repo_objects

        files = {f.path: f.size for f in get_cached_repo_tree(repo_id)}
        wanted = filter_repo_objects(list(files), allow_patterns=HUB_FILES)
        return sum(files[f] for f in wanted if not isinstance(try_to_load_from_cache(repo_id, f), str))
    except Exception:  # an older huggingface_hub, or no list cached yet: fall back to its growing total
        return 0


def _progress_bar_class(progress: ProgressCallback | None, repo_id: str | None = None):
    """A tqdm class that reports snapshot_download's byte counts to ``progress`` and prints nothing.

    ``raised`` keeps what ``progress`` raised, so the caller can tell a stop request from a failure.
    """
    from huggingface_hub.utils import tqdm as hub_tqdm

    # A subclass of huggingface_hub's own tqdm: snapshot_download names its bars (the byte count we
    # want is "huggingface_hub.snapshot_download") only for those; a plain tqdm class gets no name.
    class CallbackBar(hub_tqdm):
        raised: list[BaseException]
        lock: threading.Lock

        def __init__(self, *args, **kwargs):
            self._report = kwargs.pop("name", "") == "huggingface_hub.snapshot_download"
            self._expected = _bytes_to_fetch(repo_id) if self._report and repo_id else 0
            kwargs.update(file=io.StringIO(), disable=False)
            # Skip hub_tqdm.__init__: it disables the bar (so its count stays 0) once the app has
            # turned the hub's printed progress bars off.
            super(hub_tqdm, self).__init__(*args, **kwargs)

        def update(self, n=1):
            if progress is None or not self._report:
                return super().update(n)
            # Files download on several threads at once: count and report under one lock, or a
            # thread that counted early could report after a later count (the bar would go back).
            with CallbackBar.lock:
                result = super().update(n)
                total = max(int(self.total or 0), self._expected)
                try:
                    progress(min(int(self.n), total), total)
                except BaseException as exc:
                    CallbackBar.raised.append(exc)
                    raise
            return result

    CallbackBar.raised, CallbackBar.lock = [], threading.Lock()
    return CallbackBar


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
