"""``app.py``'s start-up and the page's GPU work in a fresh process, with the ``spaces`` package in
one of four states; prints what happened as one JSON line (read by ``tests/test_zerogpu.py``).

    python tests/zerogpu_probe.py MODE LLM_DIR IMPORTANCE_DIR NLI_DIR OUT_DIR

MODE:

- ``absent``: ``spaces`` cannot be imported (an import blocker), as where it is not installed;
- ``inactive``: the real package, off a Space (``SPACES_ZERO_GPU`` unset);
- ``fake``: a stand-in ``spaces`` whose ``GPU`` records what it decorates and the duration of
  each call, pickles what crosses (as the real one does) and marks the code it runs, so that the
  probe can tell which model calls ran inside a decorated function;
- ``real``: the real package in ZeroGPU mode (``SPACES_ZERO_GPU=true``) with a local stand-in for
  the platform's scheduler (``SPACES_ZERO_DEVICE_API_URL``): its decorated functions run in
  forked processes, their arguments, events and errors pickled through its queues. There is no
  GPU here, so the package's CUDA emulation is switched off and its two GPU hand-over steps
  (``init``: the CUDA device, ``move``: the packed weights onto it) do nothing; this CPU-only
  torch build also lacks three CUDA symbols the package reads at import, given below.

Everything runs through ``app.main`` (its ``launch`` replaced so that no server starts), and the
page's requests through the Controller it built: Ask, the API, pasted answers, a scoring option's
re-score, a cancel, an error raised inside the GPU work.
"""

from __future__ import annotations

import contextvars
import importlib.abc
import inspect
import json
import multiprocessing
import os
import pickle
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

MODE, LLM, IMPORTANCE, NLI, OUT = sys.argv[1:6]
OUT_DIR = Path(OUT)
QUESTION = "Which planet is known as the Red Planet?"
CHILD_FORWARDS = OUT_DIR / "child-forwards.txt"  # forward passes of the LLM in GPU processes
INSIDE = contextvars.ContextVar("inside_gpu_function", default=False)
report: dict = {"mode": MODE, "parent_pid": os.getpid()}


# --- the four states of `spaces` -------------------------------------------------------------


class BlockSpaces(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "spaces" or name.startswith("spaces."):
            raise ImportError(f"No module named {name!r} (blocked)")
        return None


def fake_spaces() -> types.ModuleType:
    """A ``spaces`` that records ``GPU(fn, duration=...)`` and each call's duration."""
    decorated: dict[str, list] = {}
    module = types.ModuleType("spaces")
    config = types.ModuleType("spaces.config")
    config.Config = types.SimpleNamespace(zero_gpu=True)
    module.config = config
    module.auto_wrap_disabled = False

    def disable_gradio_auto_wrap():
        module.auto_wrap_disabled = True

    def cross(value):  # what the real package sends through a multiprocessing queue
        return pickle.loads(pickle.dumps(value))

    def GPU(task=None, *, duration=None, size=None):
        if task is None:
            return lambda fn: GPU(fn, duration=duration, size=size)
        seconds = decorated.setdefault(task.__name__, [])
        assert inspect.isgeneratorfunction(task), task

        def gpu_generator(*args, **kwargs):
            seconds.append(duration(*args, **kwargs))
            args, kwargs = cross((args, kwargs))
            context = contextvars.copy_context()
            context.run(INSIDE.set, True)
            gen = context.run(task, *args, **kwargs)
            try:
                while True:
                    try:
                        value = context.run(next, gen)
                    except StopIteration:
                        return
                    yield cross(value)
            finally:
                context.run(gen.close)

        return gpu_generator

    module.GPU = GPU
    module.disable_gradio_auto_wrap = disable_gradio_auto_wrap
    module.gradio_auto_wrap = lambda fn: fn
    module.decorated = decorated
    return module


class Scheduler(BaseHTTPRequestHandler):
    """The platform's device API as the package calls it: every request gets GPU 0 at once."""

    calls: list = []

    def do_POST(self):
        url = urlparse(self.path)
        Scheduler.calls.append([url.path, {k: v[0] for k, v in parse_qs(url.query).items()}])
        body = b""
        if url.path == "/schedule":
            body = json.dumps({"idle": True, "nvidiaIndex": 0, "nvidiaUUID": "GPU-none",
                               "allowToken": f"token-{len(Scheduler.calls)}"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def no_cuda(*args, **kwargs):
    raise RuntimeError("this torch build has no CUDA")


def not_in_bad_fork() -> bool:  # module level: the package asks it in a forked process
    return False


def nothing(*args, **kwargs) -> None:
    return None


def real_spaces_without_gpu() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scheduler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = OUT_DIR / "home"
    (home / "cgroup").parent.mkdir(parents=True, exist_ok=True)
    (home / "cgroup").write_text("0::/probe\n")
    os.environ.update({
        "SPACES_ZERO_GPU": "true",
        "SPACES_ZERO_DEVICE_API_URL": f"http://127.0.0.1:{server.server_port}",
        "HOME": str(home),
        "ZEROGPU_OFFLOAD_DIR": str(home / "tensors"),
        "ZEROGPU_PROC_SELF_CGROUP_PATH": str(home / "cgroup"),
    })
    import torch
    import torch.cuda

    if torch.version.cuda is None:  # what a CUDA build has and this CPU build lacks
        torch.version.cuda = "12.8"
        torch._C._cuda_init = no_cuda
        torch.cuda._is_in_bad_fork = not_in_bad_fork
    import spaces  # noqa: F401  (imported first, as app.py does on a Space)
    import spaces.zero.gradio as spaces_gradio
    import spaces.zero.torch as spaces_torch

    spaces_torch.unpatch()  # no GPU: the models stay on the CPU, in every process
    for name in ("unpatch", "enter_mode", "init", "move"):
        setattr(spaces_torch, name, nothing)
    spaces_gradio._orig_launch = record_launch  # the package's start-up step runs, then this


if MODE == "absent":
    sys.meta_path.insert(0, BlockSpaces())
    os.environ.pop("SPACES_ZERO_GPU", None)
elif MODE == "inactive":
    os.environ.pop("SPACES_ZERO_GPU", None)
elif MODE == "fake":
    os.environ["SPACES_ZERO_GPU"] = "true"
    FAKE = fake_spaces()
    sys.modules["spaces"], sys.modules["spaces.config"] = FAKE, FAKE.config


# --- what the probe watches -------------------------------------------------------------------

forwards = {"inside": 0, "outside": 0, "llm_here": 0}
loads: list[dict] = []
compiles: list[str] = []
launched: dict = {}


def count_forward(module, args):
    if os.getpid() != report["parent_pid"]:
        if type(module).__name__.endswith("ForCausalLM"):
            with CHILD_FORWARDS.open("a") as f:
                f.write(f"{os.getpid()}\n")
        return
    forwards["inside" if INSIDE.get() else "outside"] += 1
    forwards["llm_here"] += type(module).__name__.endswith("ForCausalLM")


def llm_forwards() -> int:
    """The LLM's forward passes so far, in this process and in GPU processes."""
    child = len(CHILD_FORWARDS.read_text().splitlines()) if CHILD_FORWARDS.exists() else 0
    return forwards["llm_here"] + child


def record_launch(demo, *args, **kwargs):
    launched["engine_ready"] = CONTROLLERS[-1].host.engine.ready
    launched["status"] = CONTROLLERS[-1].host.status().state
    launched["loaded_in"] = sorted({entry["thread"] for entry in loads})


CONTROLLERS: list = []

if MODE == "real":
    real_spaces_without_gpu()

import torch  # noqa: E402

torch.nn.modules.module.register_module_forward_pre_hook(count_forward)
_compile = torch.compile


def recording_compile(*args, **kwargs):
    compiles.append(repr(args[:1]))
    return _compile(*args, **kwargs)


torch.compile = recording_compile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import gradio as gr  # noqa: E402

import app  # noqa: E402
from mars_demo.models import registry  # noqa: E402
from mars_demo.ui.page import layout  # noqa: E402
from mars_demo.ui.page.controller import ASK_OUTPUTS, Controller  # noqa: E402
from mars_demo.ui.work import worker

_load_cached = registry.load_cached


def recording_load_cached(key, what, model_id, loader, progress=None):
    def load():
        loads.append({"what": what, "inside": INSIDE.get(),
                      "thread": threading.current_thread().name})
        return loader()

    return _load_cached(key, what, model_id, load, progress)


registry.load_cached = recording_load_cached


class RecordingController(Controller):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        CONTROLLERS.append(self)


layout.Controller = RecordingController
if MODE != "real":
    gr.Blocks.launch = record_launch


# --- start-up, as `python app.py` does it -----------------------------------------------------

app.main(["--llm", LLM, "--importance", IMPORTANCE, "--nli", NLI])
controller = CONTROLLERS[-1]
host = controller.host
deadline = time.monotonic() + 300
while host.status().state != "ready":
    assert host.status().state != "failed" and time.monotonic() < deadline, host.status()
    time.sleep(0.05)
engine = host.engine
report["launched"] = launched
report["engine_load_in_4bit"] = engine.settings.load_in_4bit
if MODE == "fake":
    report["decorated"] = {name: [] for name in FAKE.decorated}
    report["auto_wrap_disabled"] = FAKE.auto_wrap_disabled
elif MODE == "real":
    from spaces.zero.decorator import decorated_cache

    report["decorated"] = sorted({fn.__name__ for fn in decorated_cache})
else:
    report["decorated"] = sorted(name for name in ("analyze_on_gpu", "score_on_gpu")
                                 if hasattr(getattr(worker, name), "zerogpu"))
report["spaces_imported"] = "spaces" in sys.modules
forwards_at_start = dict(forwards)


# --- the page's requests ----------------------------------------------------------------------


def ask_args(samples: int, max_new_tokens: int, normalization: str = "sum") -> tuple:
    return (QUESTION, "mars", samples, 0.5, max_new_tokens, 0, "auto", "model", normalization,
            "equal", "strict", "default")


updates = list(controller.ask(*ask_args(2, 4)))
report["ask"] = {
    "updates": len(updates),
    "streamed": sum("mars-streaming" in str(u.get("answer", "")) for u in updates[:-1]),
    "question": getattr(updates[-1].get("result"), "question", None),
    "error": updates[-1].get("error", ""),
}
result = updates[-1]["result"]

texts: list[str] = []
stages: list[str] = []
direct = worker.gpu_analyze(host, QUESTION, engine.settings.replace(samples=3, max_new_tokens=6),
                            progress=lambda stage, fraction: stages.append(stage),
                            on_text=texts.append)
report["streaming"] = {"texts": len(texts), "last_text_is_greedy": texts[-1] == direct.greedy.text,
                       "stages": sorted(set(stages)), "samples": len(direct.samples)}

report["api"] = controller.api.analyze(QUESTION, samples=4, max_new_tokens=5)["question"]

pasted = list(controller.score_own(QUESTION, "Mars", "Mars\nThe red one\nJupiter", "", "mars",
                                   *ask_args(2, 4)[2:]))
report["pasted"] = {"samples": len(pasted[-1]["result"].samples), "error": pasted[-1]["error"]}

rescored = controller.rescore_options(result, "mars", *ask_args(2, 4, "softmax")[2:])
report["rescore"] = {"normalization": rescored["result"].settings["normalization"],
                     "error": rescored.get("error", "")}

# A long analysis (the tiny LLM never stops before 512 tokens), cancelled at its first token.
stop = threading.Event()
cancel: dict = {}
before = llm_forwards()
try:
    worker.gpu_analyze(host, QUESTION, engine.settings.replace(samples=20, max_new_tokens=512),
                       on_text=lambda text: stop.set(), should_stop=stop.is_set)
except Exception as exc:  # noqa: BLE001  (reported, checked by the test)
    cancel["raised"] = type(exc).__name__
cancel["llm_forwards"] = llm_forwards() - before
cancel["next_question"] = worker.gpu_analyze(
    host, QUESTION, engine.settings.replace(samples=1, max_new_tokens=3)).question
report["cancel"] = cancel

try:  # an answer set the engine refuses: raised inside the GPU work
    worker.gpu_score(host, {"question": QUESTION}, engine.settings)
except Exception as exc:  # noqa: BLE001
    report["inner_error"] = {"type": type(exc).__name__, "message": str(exc)}

report["forwards"] = {"at_start": forwards_at_start, "total": forwards}
report["loads"] = loads
report["compiles"] = compiles
if MODE == "fake":
    report["decorated"] = {name: list(calls) for name, calls in FAKE.decorated.items()}
if MODE == "real":
    report["scheduler"] = Scheduler.calls
print("PROBE " + json.dumps(report))
sys.stdout.flush()
for process in multiprocessing.active_children():  # the GPU processes of `spaces`
    process.terminate()
    process.join(30)
os._exit(0)  # without waiting for the daemon threads of the page and of `spaces`
