"""What of the server a visitor may read: one redaction for every text that leaves the page.

On a public page the server's folders, the LLM server's address and the BEM models' paths are the
host's business. Every text a visitor gets goes through one :class:`Redactor`: the analysis JSON
(the API's result and the download), what the page shows of a result (its warnings, its
settings), error messages and the banner. It replaces the host's model paths and URLs it knows by
the names visitors see (a name the host gave, ``--llm-name``..., or the folder's last part), then
leaves out the folders of any other absolute path in a message the server wrote. A visitor's own
words (questions, answers) are not touched beyond the known paths. A page only the host can open
shows everything as it is, with the host's names for the models where given.

Pure functions: no gradio, no models.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from mars_demo import texts
from mars_demo.methods import OPTIONAL_MODELS, OWN_MODELS
from mars_demo.result import AnalysisResult

#: every model a page may name: the three every analysis runs, then the optional ones
MODEL_KEYS = ("llm", "importance", "nli") + tuple(m.field for m in OWN_MODELS)
#: the key naming a model inside an entry of an analysis' ``method_inputs`` -> the model it
#: names: the LLM of an extra pass (P(True), EigenScore), then each optional model's
PASS_MODELS = {"llm": "llm", **{m.model_key: m.field for m in OPTIONAL_MODELS},
               "nli_model": "nli"}
#: Settings of an analysis JSON that a public page does not hand out: where the server keeps
#: its BEM models and which server generates its answers.
PRIVATE_SETTINGS = ("llm_endpoint", "bem", "chunker")
LLM_SERVER = "the LLM server"  # an LLM server's URL, as a public page names it
_PATH = re.compile(r"(?<![\w.:/])(?:~|[A-Za-z]:)?[/\\](?:[^\s/\\'\"]+[/\\])+")


def hide_paths(text: str) -> str:
    """``text`` with the folders of absolute paths left out (a file or model keeps its last
    part).

    >>> hide_paths("cannot load '/srv/models/tiny-llm' (OSError)")
    "cannot load 'tiny-llm' (OSError)"
    """
    return _PATH.sub("", text)


def public_model_name(model: Any) -> str:
    """A model's name for a public page: a Hub id as it is, a local path by its last part.

    >>> public_model_name("/srv/models/tiny-llm/"), public_model_name("org/name")
    ('tiny-llm', 'org/name')
    """
    text = str(model)
    if (text.startswith(("/", "~", ".", "\\")) or "\\" in text or text.count("/") > 1
            or os.path.isabs(text) or os.path.exists(text)):
        return os.path.basename(os.path.normpath(text.replace("\\", "/"))) or "local model"
    return text


class Redactor:
    """The one redaction of a page. ``public``: redact (a page only the host can open shows
    everything). ``models``: the page's models as ("llm"|"importance"|"nli", id or path) pairs
    (a model may come under several spellings: the settings' and the engine's). ``names``: the
    host's names for them. ``private``: other values visitors must not see (an LLM server's URL,
    the BEM models' paths), ``{value: what is shown instead}``."""

    def __init__(self, public: bool = False, models: Iterable[tuple[str, Any]] = (),
                 names: Mapping[str, str] | None = None,
                 private: Mapping[str, str] | None = None) -> None:
        self.public = public
        self.names = dict(names or {})
        self.shown: dict[str, str] = {}  # a model's id or path -> its name for visitors
        for key, value in models:
            if value and str(value) not in self.shown:
                self.shown[str(value)] = self.model_name(key, value)
        secrets: dict[str, str] = {}  # text of the server -> what a public page shows instead
        if public:
            for value, shown in {**self.shown, **dict(private or {})}.items():
                spellings = {value}
                if not re.match(r"^\w+://", value):
                    spellings.add(os.path.abspath(os.path.expanduser(value)))
                for spelling in spellings:
                    if spelling != shown and len(spelling) > 2:
                        secrets[spelling] = shown
        self._secrets = sorted(secrets.items(), key=lambda kv: -len(kv[0]))  # paths before folders

    @classmethod
    def for_page(cls, access: Any, settings: Any, describe: Mapping[str, Any] | None = None
                 ) -> Redactor:
        """The redactor of a page with ``access`` (:class:`mars_demo.hosting.access.Access`) over an
        engine with ``settings`` and ``describe()`` (where a model may be spelled otherwise)."""
        models = [(k, getattr(settings, k, None)) for k in MODEL_KEYS]
        models += [(k, (describe or {}).get(k)) for k in MODEL_KEYS]
        return cls(access.public, models, access.model_names, _private(settings))

    def _pass(self, entry: Any) -> Any:
        if not isinstance(entry, dict):
            return entry
        entry = dict(entry)
        for field, key in PASS_MODELS.items():
            if entry.get(field) is not None:
                entry[field] = (self.shown.get(str(entry[field]))
                                or self.model_name(key, entry[field]))
        return entry

    def model_name(self, key: str, value: Any) -> str:
        """How visitors see model ``key``: the host's name for it, else (public) its folder's
        last part or its Hub id, else as it is."""
        if self.names.get(key):
            return self.names[key]
        return public_model_name(value) if self.public else str(value)

    def page_name(self, key: str, value: Any) -> str:
        """How the page's words name model ``key`` (the banner's Models line), public or not:
        the host's name for it, else its Hub id as given or its folder's last part, or the
        folder above it where that part only repeats the model's role ("importance
        tiny-trained", not "importance importance"). A page shows no server folder; a page only
        the host opens still hands out the paths in its JSON.

        >>> Redactor().page_name("nli", "/srv/tiny-trained/nli"), Redactor().page_name("nli", "org/nli")
        ('tiny-trained', 'org/nli')
        """
        if self.names.get(key):
            return self.names[key]
        name = public_model_name(value)
        if name.lower() == key.lower() and name != str(value):  # a local folder named by its role
            folder = os.path.normpath(str(value).replace("\\", "/"))
            above = os.path.basename(os.path.dirname(folder))
            return above or name
        return name

    def known(self, text: str) -> str:
        """``text`` with the server's paths and URLs this redactor knows replaced."""
        for secret, shown in self._secrets:
            if secret in text:
                text = text.replace(secret, shown)
        return text

    def text(self, text: Any) -> str:
        """A message the server wrote (a warning, an error), as a visitor may read it."""
        text = str(text)
        if not self.public:
            return text
        return hide_paths(self.known(text))

    def settings(self, settings: Mapping[str, Any]) -> dict[str, Any]:
        """An analysis' settings as visitors see them: models by name, and on a public page
        without :data:`PRIVATE_SETTINGS`."""
        shown = dict(settings)
        for key in MODEL_KEYS:
            if shown.get(key) is not None:
                shown[key] = self.shown.get(str(shown[key])) or self.model_name(key, shown[key])
        if self.public:
            for key in PRIVATE_SETTINGS:
                shown.pop(key, None)
            shown = {k: self._walk(v) for k, v in shown.items()}
        return shown

    @property
    def changes(self) -> bool:
        """Whether this redaction changes an analysis at all (a public page, or the host's
        names for its models)."""
        return self.public or bool(self.names)

    def result_dict(self, data: dict[str, Any]) -> dict[str, Any]:
        """An analysis JSON (:meth:`AnalysisResult.to_dict`) as visitors get it."""
        if not self.changes:
            return data
        data = dict(data)
        data["settings"] = self.settings(data.get("settings") or {})
        passes = data.get("method_inputs")
        if isinstance(passes, dict):  # the LLM of an extra pass (P(True)), SAR's similarity
            data["method_inputs"] = {  # model and LARS's model, named as in settings
                k: self._pass(v) for k, v in passes.items()}
        if not self.public:
            return data
        verdict = data.get("verdict")
        if isinstance(verdict, dict) and isinstance(verdict.get("calibration"), dict):
            data["verdict"] = {**verdict, "calibration": self.calibration(verdict["calibration"])}
        data = {k: (v if k == "settings" else self._walk(v)) for k, v in data.items()}
        data["warnings"] = [self.text(w) for w in data.get("warnings") or []]
        nli = data.get("nli")
        if isinstance(nli, dict) and nli.get("warnings"):
            data["nli"] = {**nli, "warnings": [self.text(w) for w in nli["warnings"]]}
        return data

    def calibration(self, estimate: Mapping[str, Any]) -> dict[str, Any]:
        """A verdict's calibration (its estimate, or why it gives none) as visitors read it: on
        a public page the models by their names, no server folder in its words, and the reason
        of an answer made by other models than the calibration's not given (it names the
        calibration's models); why other settings differ is the visitor's own, and said."""
        out = dict(estimate)
        if not self.public:
            return out
        if out.get("reason") and out.get("other") != "settings":
            out["reason"] = texts.TRUST_OTHER_MODELS
        if isinstance(out.get("models"), dict):
            out["models"] = {k: self.model_name(k, v) if v is not None else v
                             for k, v in out["models"].items()}
        for key in ("source", "data", "reason"):
            if isinstance(out.get(key), str):
                out[key] = self.text(out[key])
        return out

    def result(self, result: AnalysisResult) -> AnalysisResult:
        """``result`` as visitors see it (a copy; the page keeps the original to re-score)."""
        if not self.changes:
            return result
        return AnalysisResult.from_dict(self.result_dict(result.to_dict()))

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.known(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        return value


def _private(settings: Any) -> dict[str, str]:
    private = {}
    endpoint = getattr(settings, "llm_endpoint", None)
    if endpoint:
        private[str(endpoint)] = LLM_SERVER
    for key in ("bem", "chunker"):
        value = getattr(settings, key, None)
        if value:
            private[str(value)] = public_model_name(value)
    return private
