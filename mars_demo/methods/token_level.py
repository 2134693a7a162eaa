"""Token-level methods of the greedy answer: its probability, the entropy and the shape of the
model's next-token distribution at each of its tokens, and its length. Math:
:mod:`mars_demo.core.token_level`.

The per-token entropy (``entropy`` of each token in the analysis JSON) and self-certainty's
divergence from the uniform distribution (``kl_uniform``) are computed where the answer is made:
in-process exactly, from the logits generation already has; through an OpenAI-compatible server
the entropy from its top log-probs with the rest of the mass as one bucket (a lower bound, said in
a warning), and no ``kl_uniform`` (a server returns no full distribution).

The end-of-sequence token an answer ended on is stored with its statistics (``end_token``) but
is not one of the answer's tokens; ``end_token="include"`` (``--end-token include``) counts it
as one more token in ``msp``, ``mean_token_entropy``, ``self_certainty`` and ``ccp``, as
lm-polygraph's estimators do (its greedy statistics keep the end token).
``answer_length`` counts the answer's own tokens either way.
"""

from __future__ import annotations

from .base import method

_POLYGRAPH = "Fadeeva et al. 2023 (lm-polygraph)"


def _msp(x, _):
    from ..core import token_level

    return token_level.msp(x.greedy_tokens.token_logprobs)


def _mean_token_entropy(x, variant):
    from ..core import token_level

    g = x.greedy_tokens
    return token_level.mean_token_entropy(g.token_entropies, g.weights(variant))


def _self_certainty(x, _):
    from ..core import token_level

    return token_level.self_certainty(x.greedy_tokens.kl_uniform)


def _answer_length(x, _):
    from ..core import token_level

    return token_level.answer_length(x.greedy_answer.token_logprobs)


METHODS = (
    method("msp", "Maximum sequence probability",
           "how improbable the greedy answer is as a whole: minus the sum of its token "
           "log-probs (favours short answers)",
           ["greedy"], False, _POLYGRAPH, _msp, "estimators/max_probability.py"),
    method("mean_token_entropy", "Mean token entropy",
           "how unsure the model was at each token of the greedy answer: the entropy of its "
           "next-token distribution, averaged over the tokens",
           ["greedy", "token_entropy"], True, _POLYGRAPH, _mean_token_entropy,
           "estimators/token_entropy.py"),
    method("self_certainty", "Self-certainty",
           "how close the model's next-token distributions were to uniform along the greedy "
           "answer (negated mean KL divergence from uniform)",
           ["greedy", "full_distribution"], False, "Kang et al. 2025", _self_certainty,
           "estimators/self_certainty.py"),
    method("answer_length", "Answer length",
           "the greedy answer's length in tokens: a baseline that shows a method tracking "
           "length", ["greedy"], False, "Santilli et al. 2025", _answer_length),
)
