"""MkDocs hook: files of the repository that the site shows but that live outside docs/.

The README's screenshot is made by ``scripts/readme_screenshot.py`` into ``assets/`` (the
README, the Space's card, shows it from there); the site serves the same file instead of a copy
that could drift from it.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
#: site path -> file of the repository
REPO_FILES = {"assets/screenshot.png": ROOT / "assets" / "screenshot.png"}


def on_files(files, config):
    for uri, path in REPO_FILES.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
