"""The defaults a school's IT sets once for every user of a machine: ``defaults.conf``.

Read at start, before the user's own settings, from (a later file wins, key by key):

1. ``defaults.conf`` inside the bundle (``sys._MEIPASS``): what the build chose (the classroom
   variant's ``model = gpt2``; packaging/bundle_defaults.py writes it);
2. ``defaults.conf`` beside the program (``nexttoken.exe`` on Windows: the installer puts the
   commented template there once and leaves it on upgrades and uninstalls);
3. ``/etc/nexttoken/defaults.conf`` on Linux (the .deb's conffile: edits survive upgrades,
   ``apt-get purge`` removes it).

The user's own choices still win: the model they used last, the command line. A missing file, an
empty value or a commented line changes nothing; a value that is not understood is logged and ignored.
Plain Python, no Qt: the frozen entry point and the .deb's builder use it too.
"""

from __future__ import annotations

import configparser
import logging
import sys
from dataclasses import dataclass, replace
from pathlib import Path

log = logging.getLogger("app")

FILE_NAME = "defaults.conf"
SECTION = "nexttoken"
SYSTEM_FILE = Path("/etc/nexttoken") / FILE_NAME  # Linux: the .deb's conffile


@dataclass(frozen=True)
class SiteDefaults:
    """model: the model a user's first window opens (a bundled model's name such as
    SmolLM2-135M-Instruct, gpt2-tiny-demo, gpt2 in the classroom build, or a folder); None: the app's
    own choice. projector: start in projector mode. hub_downloads: offer downloads from the
    Hugging Face hub (off: the Model menu offers none and the engine never goes online)."""

    model: str | None = None
    projector: bool = False
    hub_downloads: bool = True


TEMPLATE = """\
# nexttoken's defaults for every user of this computer. A user's own choices still win: the model
# they opened last, and the command line. Remove the "#" in front of a line to set it.
[nexttoken]
# The model a new user's first window opens: a bundled model (SmolLM2-135M-Instruct, gpt2-tiny-demo,
# gpt2 in the classroom build) or a model folder. Empty: SmolLM2-135M-Instruct where it is bundled.
{model}
# Start in projector mode (large fonts, high contrast): yes or no.
# projector = no
# Offer downloads from the Hugging Face model hub (Model -> GPT-2 small): yes or no.
# hub_downloads = yes
"""


def template(model: str | None = None) -> str:
    """The text of a defaults.conf: every key commented out, or ``model`` set."""
    return TEMPLATE.format(model=f"model = {model}" if model else "# model = SmolLM2-135M-Instruct")


def site_files() -> list[Path]:
    """The defaults files this program reads, lowest first (the module docstring's order)."""
    files = []
    if getattr(sys, "frozen", False):
        files.append(Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / FILE_NAME)
        files.append(Path(sys.executable).resolve().parent / FILE_NAME)
    if sys.platform.startswith("linux"):
        files.append(SYSTEM_FILE)
    return list(dict.fromkeys(files))  # a one-folder build without _internal/ has both in one place


def read_site_defaults(files: list[Path] | None = None) -> SiteDefaults:
    """The defaults set in ``files`` (default: site_files()), a later file winning key by key."""
    found = SiteDefaults()
    for path in site_files() if files is None else files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            if not parser.read(path, encoding="utf-8") or not parser.has_section(SECTION):
                continue
        except (configparser.Error, UnicodeDecodeError) as exc:
            log.warning("ignoring %s: %s", path, exc)
            continue
        section = parser[SECTION]
        for key in section:
            value = section[key].strip()
            if key == "model":
                found = replace(found, model=value or None)
            elif key in ("projector", "hub_downloads") and value:
                try:
                    found = replace(found, **{key: section.getboolean(key)})
                except ValueError:
                    log.warning("%s: %s = %r is not yes or no; ignored", path, key, value)
            elif key not in ("projector", "hub_downloads"):
                log.warning("%s: unknown setting %r; ignored", path, key)
    return found
