"""Chat messages, as lm-polygraph and TruthTorchLM take a question: ``{"role", "content"}``
dicts (a system prompt, earlier turns), the question the last ``user`` message. The engine's door
(:func:`mars_demo.engine.door.door`) and an answer set's JSON read them through
:func:`parse_messages`.
"""

from __future__ import annotations

from typing import Any

from .errors import AnswerSetError

#: the roles a chat message may have (the question is the last "user" message)
ROLES = ("system", "user", "assistant")
#: the most messages a conversation may have
MAX_MESSAGES = 50


def parse_messages(value: Any) -> list[dict[str, str]]:
    """Chat messages checked: a list of ``{"role": ..., "content": ...}`` dicts, roles of
    :data:`ROLES`, text content, the last one the question (a "user" message). Raises
    :class:`AnswerSetError` (an ``OptionError``) naming the message at fault.

    >>> parse_messages([{"role": "system", "content": "Be brief."},
    ...                 {"role": "user", "content": "Red planet?"}])[-1]
    {'role': 'user', 'content': 'Red planet?'}
    """
    if not isinstance(value, list) or not value:
        raise AnswerSetError("messages must be a non-empty list of {role, content} objects")
    if len(value) > MAX_MESSAGES:
        raise AnswerSetError(f"there are {len(value)} messages; the limit is {MAX_MESSAGES}")
    out = []
    for n, message in enumerate(value, 1):
        if not isinstance(message, dict) or set(message) - {"role", "content"}:
            raise AnswerSetError(f"message {n} must be an object with role and content only")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise AnswerSetError(f"message {n}: role must be one of {', '.join(ROLES)}; "
                                 f"got {str(role)[:30]!r}")
        if not isinstance(content, str):
            raise AnswerSetError(f"message {n}: content must be text")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise AnswerSetError("the last message must be the question (role user)")
    return out
