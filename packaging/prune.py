"""What the spec leaves out of the bundle: files PyInstaller's hooks collect but nexttoken never loads.

Each rule was checked by building without the files and running the frozen ``--smoke-test``.
Patterns match the destination path inside the bundle (``/``-separated, lower case).
"""

from __future__ import annotations

import fnmatch
import re

DROP_PATTERNS = (
    # torch's C++ test programs, protoc and test libraries (~45 of torch/bin's 50 MB, torch/test's
    # 83 MB). Not all of torch/bin: `import torch` checks that torch/bin/torch_shm_manager exists.
    "torch/bin/*test*",
    "torch/bin/protoc*",
    "torch/test/*",
    "torch/lib/*_test.*",
    # Qt's own translations (standard dialogs in other languages; the app's text is English).
    "pyside6/qt/translations/*",
    "pyside6/translations/*",
    # Qt platform plugins for embedded devices and remote framebuffers; desktops use xcb, wayland,
    # windows or cocoa, and the smoke test uses offscreen (all kept).
    "*/plugins/platforms/*qeglfs*",
    "*/plugins/platforms/*qlinuxfb*",
    "*/plugins/platforms/*qminimalegl*",
    "*/plugins/platforms/*qvkkhrdisplay*",
    "*/plugins/platforms/*qvnc*",
    "*/plugins/egldeviceintegrations/*",
    "*/plugins/generic/*",
    "*libqt6eglfs*",  # libQt6EglFSDeviceIntegration, libQt6EglFsKmsSupport: used only by eglfs
    # Qt's GTK platform theme: loaded on GNOME against the bundled GLib, it aborts on newer
    # distributions (undefined symbol: g_once_init_enter_pointer). Qt's own Fusion style stands in.
    "*/plugins/platformthemes/libqgtk3.so",
    # Fonts come from the system, as AppImage's exclude list does: a bundled fontconfig older than the
    # system's configuration files fails to read them and finds no fonts.
    "libfontconfig.so*",
    "libfreetype.so*",
)

# GPU runtimes found on the build machine (torch._inductor names libcudart, libamdhip64 in ctypes
# calls, and PyInstaller resolves them from /usr/local/cuda). The CPU build of torch never loads them.
GPU_LIBRARY = re.compile(
    r"(^|/)(lib)?(cuda|cudart|cudnn|cublas|cufft|curand|cusolver|cusparse|nccl|nvrtc|nvjitlink|"
    r"nvtoolsext|amdhip|hiprtc|rocm|miopen)[^/]*\.(so(\.[0-9.]+)?|dll|dylib)$"
)


def is_unneeded(dest: str) -> bool:
    """True when the bundle path ``dest`` matches a rule above."""
    path = dest.replace("\\", "/").lower()
    return bool(GPU_LIBRARY.search(path)) or any(fnmatch.fnmatch(path, p) for p in DROP_PATTERNS)


def prune(toc: list[tuple]) -> tuple[list[tuple], list[str]]:
    """Split a PyInstaller TOC ((dest, source, kind) tuples) into what is kept and the dropped paths."""
    kept, dropped = [], []
    for entry in toc:
        (dropped.append(entry[0]) if is_unneeded(entry[0]) else kept.append(entry))
    return kept, dropped
