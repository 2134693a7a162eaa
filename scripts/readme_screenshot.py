"""Make the README's screenshot: the page on the trained tiny models, one example asked.

    python scripts/readme_screenshot.py [--models DIR] [--out assets/screenshot.png]
        [--width 1280] [--question "..."] [--theme light|dark]

It builds the trained tiny models into ``--models`` when they are not there yet
(``make-tiny-models --trained``, about 1.5 minutes on 2 cores), serves ``app.py`` on them on a
free loopback port, asks the question in headless Chromium (Debian's ``/usr/bin/chromium``, as
the browser tests use) and saves the top of the page: the question, the colored answer, the
verdict and the uncertainty table and plot. Beside the image (``--out`` with ``.json`` for
``.png``) it writes the state it shot: the question, the width and theme, the analysis shown
(the page's own download) and the page's main texts as the browser had them (the verdict line,
the answer, the uncertainty table's rows, the Models line); ``tests/test_readme_screenshot.py``
renders today's page from that analysis and fails when its texts are no longer those of the
image. Needs ``requirements-dev.txt`` (Playwright).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
QUESTION = "Which planet is known as the Red Planet?"
ROLES = ("llm", "importance", "nli")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_models(folder: Path) -> None:
    if all((folder / role / "config.json").is_file() for role in ROLES):
        return
    print(f"building the trained tiny models in {folder} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "mars_demo", "make-tiny-models", str(folder),
                    "--trained"], cwd=ROOT, check=True)


def wait_for(url: str, server: subprocess.Popen, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"app.py exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"app.py did not answer at {url} within {timeout_s:.0f} s")


#: the page's main texts, as the browser has them (textContent, spaces squeezed): what the
#: README's image shows and its test compares with today's page
MAIN_TEXTS = """() => {
  const text = el => (el ? el.textContent : '').replace(/\\s+/g, ' ').trim();
  const banner = [...document.querySelectorAll('#mars-banner .mars-banner')]
    .map(text).find(t => t.startsWith('Models:')) || '';
  return {
    verdict: text(document.querySelector('#mars-verdict .mars-verdict-line')),
    answer: text(document.querySelector('#mars-answer .mars-answer-text')),
    rows: [...document.querySelectorAll('#mars-uncertainty-table tbody td[data-col="measure"]')]
      .map(text),
    models: banner,
  };
}"""


def shoot(url: str, out: Path, width: int, question: str, theme: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": width, "height": 900},
                                device_scale_factor=1)
        page.goto(url + (f"/?__theme={theme}" if theme != "light" else "/"))
        page.wait_for_function(
            "() => { const t = document.querySelector('#mars-banner')?.innerText || '';"
            " return t.includes('Models:') && !t.includes('Loading'); }",
            timeout=180_000,
        )
        page.fill("#mars-question textarea", question)
        page.click("#mars-ask")
        page.wait_for_selector("#mars-verdict .mars-verdict[data-level][data-analysis]",
                               timeout=180_000)
        page.wait_for_function("() => !document.querySelector('#mars-ask').disabled",
                               timeout=180_000)
        page.wait_for_selector("#mars-uncertainty-plot .main-svg", timeout=60_000)
        page.wait_for_timeout(1500)  # plots finish their transitions
        page.evaluate("() => window.scrollTo(0, 0)")
        # the top of the page down to the end of the uncertainty plot
        bottom = page.evaluate(
            "() => { const r = document.querySelector('#mars-uncertainty-plot')"
            ".getBoundingClientRect(); return Math.ceil(r.bottom + window.scrollY + 16); }"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out), full_page=True,
                        clip={"x": 0, "y": 0, "width": width, "height": bottom})
        shown = page.evaluate(MAIN_TEXTS)
        with page.expect_download() as download:  # the page's own JSON of what it shows
            page.click("#mars-download")
        analysis = json.loads(Path(download.value.path()).read_text(encoding="utf-8"))
        state = {"question": question, "width": width, "theme": theme, "texts": shown,
                 "analysis": analysis}
        out.with_suffix(".json").write_text(json.dumps(state, indent=1, ensure_ascii=False)
                                            + "\n", encoding="utf-8")
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="/tmp/tiny-trained",
                        help="folder of the trained tiny models (built when missing)")
    parser.add_argument("--out", default=str(ROOT / "assets" / "screenshot.png"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--question", default=QUESTION)
    parser.add_argument("--theme", choices=("light", "dark"), default="light")
    args = parser.parse_args(argv)

    models = Path(args.models)
    ensure_models(models)
    port = free_port()
    # its own example store: the analysis shot is made here, not taken from another page's
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1",
               MARS_DEMO_EXAMPLE_CACHE=tempfile.mkdtemp(prefix="mars-screenshot-"))
    server = subprocess.Popen(
        [sys.executable, "app.py", "--port", str(port),
         *[arg for role in ROLES for arg in (f"--{role}", str(models / role))]],
        cwd=ROOT, env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(url, server)
        shoot(url, Path(args.out), args.width, args.question, args.theme)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
