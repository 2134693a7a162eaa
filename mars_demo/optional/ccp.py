"""CCP's pass (:mod:`mars_demo.methods.ccp`): the analysis' own NLI model judging each greedy
token against its top alternatives, saved as ``method_inputs["ccp"]`` by
:mod:`mars_demo.engine.stages.ccp`. A pass of a model every analysis names already: no class,
flag or loader of its own."""

from __future__ import annotations

from .spec import OptionalModel

SPEC = OptionalModel(
    field="nli", need="alternatives_nli", label="NLI (CCP's alternatives)", saved="ccp",
    holds="NLI verdicts of the greedy tokens' alternatives", model_key="nli_model",
    family="ccp", output="ccp_outputs")
