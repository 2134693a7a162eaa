"""What the page relies on inside Gradio 6.17 beyond its documented API (mars_demo/ui/guards/limits.py,
memory.py, sessions.py, renders.py, origins.py): each test fails loudly, naming the part, when a
Gradio upgrade changes it, rather than letting a limit silently stop holding.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import OrderedDict

import gradio as gr
import pytest
from ui_helpers import FakeEngine

from mars_demo.ui import build_demo


@pytest.fixture(scope="module")
def demo():
    return build_demo(FakeEngine())


def test_the_state_holder_is_what_sessions_replaces(demo):
    """sessions.Sessions subclasses StateHolder: it overrides ``__getitem__`` (which makes a
    session for an unknown id) and ``update`` (which drops the least recently used one), and
    keeps its ``session_data``, ``time_last_used``, ``lock`` and ``delete_state``."""
    from gradio.routes import App
    from gradio.state_holder import SessionState, StateHolder

    holder = StateHolder()
    holder.set_blocks(demo)
    assert isinstance(holder.session_data, OrderedDict) and holder.time_last_used == {}
    assert hasattr(holder, "lock") and callable(holder.delete_state)
    state = holder["a"]
    assert "a" in holder.session_data and "a" in holder.time_last_used
    holder.capacity = 1
    holder["b"]
    assert list(holder.session_data) == ["b"]  # Gradio's drop of the oldest, whatever it holds
    assert isinstance(state, SessionState)  # what a session's key gave: Gradio's own object
    # the routes and the queue reach it as app.state_holder and blocks.state_holder
    assert "self.state_holder = StateHolder()" in inspect.getsource(App.__init__)


def test_a_lean_session_has_the_attributes_of_gradios(demo):
    from gradio.state_holder import SessionState

    from mars_demo.ui.guards.sessions import LeanSession

    full, lean = SessionState(demo), LeanSession(demo)
    assert set(vars(lean)) == set(vars(full))
    assert type(lean.blocks_config) is type(full.blocks_config)
    assert lean.blocks_config.blocks.keys() == full.blocks_config.blocks.keys()
    assert lean.config_values == {} and full.config_values  # what it leaves out


def test_the_queue_keeps_what_the_page_bounds(demo):
    """limits.QueueDoor and memory.MemoryBounds read and wrap these."""
    from gradio.queueing import Queue
    from gradio.utils import LRUCache

    queue = demo._queue
    assert isinstance(queue.pending_messages_per_session, LRUCache)
    assert isinstance(queue.pending_event_ids_session, dict)
    for name in ("event_ids_to_events", "event_analytics", "event_queue_per_concurrency_id",
                 "active_jobs", "_asyncio_tasks"):
        assert hasattr(queue, name), name
    assert list(inspect.signature(Queue.push).parameters) == ["self", "body", "request",
                                                               "username"]
    assert list(inspect.signature(Queue.send_message).parameters)[:3] == [
        "self", "event", "event_message"]
    source = inspect.getsource(Queue.send_message)
    assert "pending_messages_per_session[event.session_hash]" in source
    assert "put_nowait" in source  # an asyncio.Queue per session, which memory drains
    assert isinstance(asyncio.Queue(), asyncio.Queue)
    processing = inspect.getsource(Queue.process_events)
    assert "ProcessStartsMessage" in processing and "ProcessCompletedMessage" in processing


def test_a_plot_passes_serialized_data_on_as_it_is():
    """renders.plot_data and the Evaluation view's cache send charts serialized once."""
    import plotly.graph_objects as go
    from gradio.components.plot import PlotData

    from mars_demo.ui.guards.kept_renders import plot_data

    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    made = gr.Plot().postprocess(fig)
    assert isinstance(made, PlotData) and made.type == "plotly"
    ours = plot_data(fig)
    assert gr.Plot().postprocess(ours) is ours and ours.plot == made.plot


def test_a_states_change_is_sent_to_the_page():
    """The scoring toggle's one re-render runs on the result state's change: Gradio tracks the
    states an event's outputs change when a listener waits for it, and tells the page."""
    from gradio.blocks import Blocks

    source = inspect.getsource(Blocks.process_api)
    assert "changed_state_ids" in source and "get_state_ids_to_track" in source
    with gr.Blocks() as blocks:
        state, out = gr.State(None), gr.Textbox()
        state.change(lambda s: str(s), state, out)
    assert "change" in [event if isinstance(event, str) else event.event_name
                        for event in gr.State.EVENTS]
    assert any((state._id, "change") in fn.targets for fn in blocks.fns.values())


def test_the_routes_the_limits_name_exist(demo):
    """limits.DIRECT_ROUTE and COMPONENT_SERVER name Gradio's routes outside the queue."""
    from mars_demo.ui.guards.limits import COMPONENT_SERVER, DIRECT_ROUTE

    app = gr.routes.App.create_app(demo)
    server = str(app.url_path_for("component_server")).rstrip("/")
    assert server == "/gradio_api" + COMPONENT_SERVER and DIRECT_ROUTE.search(server)
    # /run/<api_name> and /api/<api_name>, both one handler
    assert DIRECT_ROUTE.search(str(app.url_path_for("predict", api_name="x")).rstrip("/"))
    assert DIRECT_ROUTE.search("/gradio_api/run/predict")
    assert DIRECT_ROUTE.search("/gradio_api/component_server")
    assert not DIRECT_ROUTE.search("/gradio_api/queue/join")


def test_what_the_route_list_and_the_file_door_read(demo):
    """route_list reads the live routes through FastAPI's iter_route_contexts (the routes of
    included routers with their full path, each with its ``matches``), again when the router's
    ``_get_routes_version`` changes, and matches Starlette's route path; uploads wraps the
    demo's ``process_api``, which every route's events reach through call_process_api, and
    replaces ``gradio.routes.file_upload_statuses``, which the routes read by that name; stop
    calls delete_files_created_by_app over the demo's temp_file_sets."""
    import gradio.route_utils
    import gradio.routes
    from fastapi.routing import iter_route_contexts
    from gradio.route_utils import FileUploadProgress

    app = gr.routes.App.create_app(demo)
    routes = list(iter_route_contexts(app.routes))
    join = [r for r in routes if r.path == "/gradio_api/queue/join"]
    assert len(join) == 1 and join[0].methods == {"POST"}
    scope = {"type": "http", "method": "POST", "path": "/gradio_api/queue/join",
             "root_path": "", "path_params": {}}
    assert join[0].matches(scope)[0].name == "FULL"
    # the list is read again when the router's version of its routes changes
    from starlette._utils import get_route_path

    version = app.router._get_routes_version()
    app.get("/added-later")(lambda: None)
    assert app.router._get_routes_version() != version
    assert get_route_path({"path": "/root/config", "root_path": "/root"}) == "/config"
    assert "app.get_blocks().process_api(" in inspect.getsource(
        gradio.route_utils.call_process_api)
    assert isinstance(gradio.routes.file_upload_statuses, FileUploadProgress)
    source = inspect.getsource(gradio.routes.App.create_app)
    assert "file_upload_statuses.is_tracked(upload_id)" in source
    assert "file_upload_statuses.stop_tracking(upload_id)" in source
    assert list(inspect.signature(FileUploadProgress.track).parameters) == ["self", "upload_id"]
    assert hasattr(demo, "temp_file_sets")
    assert list(inspect.signature(gradio.route_utils.delete_files_created_by_app).parameters) == [
        "blocks", "age"]
