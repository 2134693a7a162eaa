"""The page's option controls and the API's parameters, built from :mod:`mars_demo.options`.

Ranges, choices and defaults come from the one schema; labels and help texts for people come from
:mod:`mars_demo.texts`. ``PAGE_OPTIONS`` is the order in which the page passes its controls to the
handlers; ``API_OPTIONS`` the order of the API's parameters after the question.
"""

import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

from mars_demo import texts
from mars_demo.options import OPTIONS, REQUEST_FIELDS, SCORING_FIELDS, Option

# Options a visitor sets on the page (top-p and the softmax temperature are API-only).
PAGE_OPTIONS = (
    "samples", "temperature", "max_new_tokens", "seed", "prompt",
    "importance_method", "normalization", "distribution", "cluster_rule", "recipe",
)
API_OPTIONS = REQUEST_FIELDS
# Page controls whose change re-scores the answer on screen instead of waiting for the next Ask.
RESCORING_OPTIONS = tuple(name for name in PAGE_OPTIONS if name in SCORING_FIELDS)
AUTO = "auto"  # the page's and the API's word for an optional option left automatic (None)
ELEM_IDS = {"samples": "mars-samples-n"}  # "mars-samples" is the samples table
DROPDOWNS = ("importance_method",)  # long choice labels: a dropdown rather than radio buttons


def elem_id(name: str) -> str:
    return ELEM_IDS.get(name, "mars-" + name.replace("_", "-"))


def control(name: str, exclude: tuple[str, ...] = ()) -> gr.components.Component:
    """The page's control of option ``name``: a slider for a range, a number for the seed, radio
    buttons for up to three short choices, a dropdown otherwise. ``exclude``: choices this page
    does not offer (e.g. "bem" when the host set up no BEM models)."""
    opt = OPTIONS[name]
    label, info = texts.OPTION_TEXTS[name]
    common = dict(label=label, info=info, elem_id=elem_id(name))
    if opt.bounds is not None:
        lo, hi = opt.bounds
        if name == "seed":  # 2**32 values: a slider could not pick one
            return gr.Number(value=opt.default, precision=0, minimum=lo, maximum=hi, **common)
        step = 1 if opt.kind is int else 0.05
        return gr.Slider(lo, hi, value=opt.default, step=step, **common)
    choices = list(texts.OPTION_CHOICES.get(name) or [(c, c) for c in opt.choices])
    choices = [(label, v) for label, v in choices if v not in exclude]
    if opt.optional and AUTO not in [v for _, v in choices]:
        choices.insert(0, (AUTO, AUTO))
    value = AUTO if opt.default is None else opt.default
    if len(choices) <= 3 and name not in DROPDOWNS:
        return gr.Radio(choices, value=value, **common)
    return gr.Dropdown(choices, value=value, **common)


def page_default(name: str) -> Any:
    """The value control ``name`` has as the page opens (as :func:`control` sets it)."""
    opt = OPTIONS[name]
    return AUTO if opt.default is None and opt.bounds is None else opt.default


def from_page(name: str, value: Any) -> Any:
    """A control's value as Settings wants it: "auto" -> None, 5.0 -> 5 for integers."""
    opt = OPTIONS[name]
    if opt.optional and value == AUTO:
        return None
    if opt.kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def api_parameter_doc(opt: Option) -> str:
    """One line of the API's parameter docs (Gradio reads "name: text" lines)."""
    text = opt.describe()
    if opt.optional:
        text = text.replace(f"default: {opt.auto}", f'default: "{AUTO}" ({opt.auto})')
    return f"{opt.name}: {text}"


def api_signature(first: list[inspect.Parameter]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and type hints of an API function: ``first`` then every API option with
    its default (Gradio builds the endpoint's parameters from these)."""
    params = list(first)
    hints: dict[str, Any] = {p.name: p.annotation for p in first}
    for name in API_OPTIONS:
        opt = OPTIONS[name]
        kind = {int: int, float: float}.get(opt.kind, str)
        default = AUTO if opt.default is None else opt.default
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=default, annotation=kind))
        hints[name] = kind
    return inspect.Signature(params, return_annotation=dict[str, Any]), hints


def with_api_signature(fn: Callable[..., Any], first: list[inspect.Parameter],
                       doc: str) -> Callable[..., Any]:
    """``fn(*first, **options)`` with the full signature, type hints and parameter docs of the
    schema, so that ``gr.api`` documents every parameter."""
    signature, hints = api_signature(first)
    fn.__signature__ = signature  # type: ignore[attr-defined]
    fn.__annotations__ = {**hints, "return": dict[str, Any]}
    lines = [doc.rstrip(), "", "Parameters:"]
    lines += [f"    {p.name}: {texts.API_FIRST_PARAMS[p.name]}" for p in first]
    lines += [f"    {api_parameter_doc(OPTIONS[name])}" for name in API_OPTIONS]
    fn.__doc__ = "\n".join(lines)
    return fn
