"""Draw nexttoken's icon with QPainter (offscreen) and write it as PNG, Windows .ico and macOS .icns.

The outputs are committed under ``resources/icons/``; run this again only to change the design:

    QT_QPA_PLATFORM=offscreen python packaging/make_icon.py

The .ico and .icns containers hold PNG images, which every supported Windows and macOS version
reads, so no Pillow or iconutil is needed.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QPainterPath

ICON_DIR = Path(__file__).resolve().parent.parent / "resources" / "icons"
ICO_SIZES = (16, 32, 48, 256)
ICNS_TYPES = {128: b"ic07", 256: b"ic08", 512: b"ic09"}  # PNG-payload icon types


def draw(size: int) -> QImage:
    """The icon at ``size`` pixels: a rounded navy tile, three probability bars, the chosen one lit."""
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    s = size / 256.0
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    tile = QPainterPath()
    tile.addRoundedRect(QRectF(8 * s, 8 * s, 240 * s, 240 * s), 48 * s, 48 * s)
    p.fillPath(tile, QColor("#1f2a44"))
    # Next-token distribution: three bars, the sampled (tallest) one highlighted.
    for x, height, color in ((44, 70, "#5b6b8c"), (100, 150, "#f2b233"), (156, 100, "#5b6b8c")):
        bar = QPainterPath()
        bar.addRoundedRect(QRectF(x * s, (200 - height) * s, 44 * s, height * s), 8 * s, 8 * s)
        p.fillPath(bar, QColor(color))
    if size >= 48:  # the caret is unreadable below 48 px
        font = QFont("DejaVu Sans")
        font.setPixelSize(max(1, int(56 * s)))
        font.setBold(True)
        p.setFont(font)
        p.setPen(QColor("#ffffff"))
        p.drawText(QRectF(150 * s, 24 * s, 80 * s, 70 * s), Qt.AlignmentFlag.AlignCenter, "›")
    p.end()
    return image


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICO file whose entries are PNG images (ICONDIR, one ICONDIRENTRY each, then the data)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    entries, offset = b"", 6 + 16 * len(pngs)
    for size, data in pngs.items():
        dim = 0 if size >= 256 else size  # 0 means 256 in an ICONDIRENTRY
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    return header + entries + b"".join(pngs.values())


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """An ICNS file: 'icns' + total length, then one (type, length, PNG) block per size."""
    blocks = b"".join(ICNS_TYPES[size] + struct.pack(">I", 8 + len(data)) + data for size, data in pngs.items())
    return b"icns" + struct.pack(">I", 8 + len(blocks)) + blocks


def main() -> int:
    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 (fonts need it)
    ICON_DIR.mkdir(parents=True, exist_ok=True)
    (ICON_DIR / "nexttoken.png").write_bytes(png_bytes(draw(256)))
    (ICON_DIR / "nexttoken.ico").write_bytes(ico_bytes({n: png_bytes(draw(n)) for n in ICO_SIZES}))
    (ICON_DIR / "nexttoken.icns").write_bytes(icns_bytes({n: png_bytes(draw(n)) for n in ICNS_TYPES}))
    for path in sorted(ICON_DIR.iterdir()):
        print(f"{path.relative_to(ICON_DIR.parent.parent)}  {path.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
