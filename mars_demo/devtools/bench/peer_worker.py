"""The peers' side of ``python -m mars_demo.bench --peers``: run by the python of the peers' venv
(``scripts/peers_venv.sh``: lm-polygraph 0.7.0 and TruthTorchLM 0.1.19 with the project's torch
and transformers), with the project's root on its path for :mod:`.peer_clock` alone; nothing else
of the project is imported, and what runs is the peers' own code as a user calls it.

It loads the LLM, the NLI model and the importance model once (the load is reported apart), puts
the one :class:`~.peer_clock.StageClock` on them, then answers requests, one JSON object per line
on stdin (``{"system": "lm-polygraph" | "truthtorchlm", "question": ..., "seed": N}``), with one
line on stdout starting with :data:`MARK` and the question's seconds, stages and answers.
Everything the libraries print goes to stderr.

What each system runs for a question (the analysis a user of it gets):

* lm-polygraph: its stat calculators as its ``UEManager`` chains them for the estimators asked
  (``GreedyProbsCalculator`` without attention maps, ``EntropyCalculator``,
  ``SamplingGenerationCalculator`` for the samples, ``SemanticMatrixCalculator`` with the NLI
  model in batches of 10, ``SemanticClassesCalculator``), then ``MaximumSequenceProbability``,
  ``Perplexity``, ``MeanTokenEntropy``, ``MonteCarloNormalizedSequenceEntropy``,
  ``SemanticEntropy``, ``NumSemSets``, ``EigValLaplacian``, ``DegMat``, ``Eccentricity``,
  ``KernelLanguageEntropy`` and ``LexicalSimilarity``. It has no MARS: no importance model runs.
* TruthTorchLM: ``generate_with_truth_value`` with ``MARS`` (the importance model),
  ``SemanticEntropy`` (the NLI model) and ``Entropy``, which share its sampled answers.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import sys
import time

MARK = "@@peer "
SYSTEMS = ("lm-polygraph", "truthtorchlm")


def load(args):
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DebertaForSequenceClassification,
    )

    torch.set_num_threads(args.threads)
    models = {
        "llm": AutoModelForCausalLM.from_pretrained(args.llm).eval(),
        "llm_tokenizer": AutoTokenizer.from_pretrained(args.llm),
        "nli": DebertaForSequenceClassification.from_pretrained(args.nli).eval(),
        "nli_tokenizer": AutoTokenizer.from_pretrained(args.nli),
        "importance": AutoModelForTokenClassification.from_pretrained(args.importance).eval(),
        "importance_tokenizer": AutoTokenizer.from_pretrained(args.importance),
    }
    return models


def lm_polygraph_system(m, args):
    """A function of (question, seed) running lm-polygraph's analysis."""
    import torch
    from lm_polygraph import WhiteboxModel
    from lm_polygraph import estimators as est
    from lm_polygraph.stat_calculators import (
        EntropyCalculator,
        GreedyProbsCalculator,
        SamplingGenerationCalculator,
        SemanticClassesCalculator,
        SemanticMatrixCalculator,
    )
    from lm_polygraph.utils.deberta import Deberta
    from lm_polygraph.utils.generation_parameters import GenerationParameters

    # as its WhiteboxModel.from_pretrained prepares the tokenizer (left padding, a pad token),
    # on a copy: TruthTorchLM reads the tokenizer as loaded
    tokenizer = copy.deepcopy(m["llm_tokenizer"])
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = WhiteboxModel(m["llm"], tokenizer, model_path=args.llm, instruct=True,
                          generation_parameters=GenerationParameters(
                              temperature=args.temperature, top_k=0, top_p=1.0))
    nli = Deberta.__new__(Deberta)  # its setup() would load the slow tokenizer's files
    nli.deberta_path, nli.batch_size, nli.device, nli.hf_cache = args.nli, 10, "cpu", None
    nli._deberta, nli._deberta_tokenizer = m["nli"], m["nli_tokenizer"]
    calculators = [GreedyProbsCalculator(output_attentions=False), EntropyCalculator(),
                   SamplingGenerationCalculator(samples_n=args.samples),
                   SemanticMatrixCalculator(nli), SemanticClassesCalculator()]
    estimators = [est.MaximumSequenceProbability(), est.Perplexity(), est.MeanTokenEntropy(),
                  est.MonteCarloNormalizedSequenceEntropy(), est.SemanticEntropy(),
                  est.NumSemSets(), est.EigValLaplacian(), est.DegMat(), est.Eccentricity(),
                  est.KernelLanguageEntropy(), est.LexicalSimilarity("rougeL")]

    def run(question: str, seed: int) -> dict:
        torch.manual_seed(seed)
        stats: dict = {}
        for calculator in calculators:
            stats.update(calculator(stats, [question], model, args.answer_tokens))
        values = {str(e): float(e(stats)[0]) for e in estimators}
        return {"answers": [stats["greedy_texts"][0], *stats["sample_texts"][0]],
                "values": values}

    return run


def truthtorchlm_system(m, args):
    """A function of (question, seed) running TruthTorchLM's analysis."""
    from TruthTorchLM import generate_with_truth_value
    from TruthTorchLM.truth_methods import MARS, Entropy, SemanticEntropy

    methods = [MARS(mars_model=m["importance"], mars_tokenizer=m["importance_tokenizer"],
                    device="cpu"),
               SemanticEntropy(number_of_generations=args.samples,
                               model_for_entailment=m["nli"],
                               tokenizer_for_entailment=m["nli_tokenizer"],
                               entailment_model_device="cpu"),
               Entropy(number_of_generations=args.samples)]

    def run(question: str, seed: int) -> dict:
        out = generate_with_truth_value(
            model=m["llm"], messages=[{"role": "user", "content": question}], question=question,
            truth_methods=methods, tokenizer=m["llm_tokenizer"], generation_seed=seed,
            max_new_tokens=args.answer_tokens, temperature=args.temperature, top_k=0,
            top_p=1.0)
        values = [float(v) for v in out["unnormalized_truth_values"]]
        return {"answers": [out["generated_text"]],
                "values": dict(zip(("MARS", "SemanticEntropy", "Entropy"), values))}

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="peer_worker")
    p.add_argument("--llm", required=True)
    p.add_argument("--nli", required=True)
    p.add_argument("--importance", required=True)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--answer-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    args = p.parse_args(argv)
    reply = sys.stdout
    sys.stdout = sys.stderr  # the libraries' prints must not reach the replies
    from mars_demo.devtools.bench.peer_clock import StageClock

    t = time.perf_counter()
    models = load(args)
    clock = StageClock(args.answer_tokens)
    clock.put_on(models["llm"], models["importance"], models["nli"])
    makers = {"lm-polygraph": lm_polygraph_system, "truthtorchlm": truthtorchlm_system}
    systems = {name: makers[name](models, args) for name in args.systems.split(",")}
    reply.write(MARK + json.dumps({"ready": True, "load_s": time.perf_counter() - t}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        ask = json.loads(line)
        clock.take(0.0)  # nothing left from before
        t = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            made = systems[ask["system"]](ask["question"], int(ask["seed"]))
        out = clock.take(time.perf_counter() - t)
        out.update(made)
        reply.write(MARK + json.dumps(out) + "\n")
        reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
