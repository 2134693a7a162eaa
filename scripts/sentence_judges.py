"""How much the judge decides: one run of sentence answers, judged by every lexical judge and by
hand, offline.

    python scripts/sentence_judges.py [--models DIR] [--out runs/sentence-judges]

The trained tiny models (``make-tiny-models --trained``, built into ``--models`` when they are
not there yet; about 1.5 minutes on 2 cores) answer in sentences, as the paper's few-shot
prompt and chat models do. The script asks them the 41 questions they were trained on (their
greedy answers are right) and the 40 of ``data/facts.jsonl`` (most of them unknown to the
model: wrong answers), scores the answers, then re-judges the same run (``evaluate
rejudge``, nothing generated again) with the hand labels of ``data/sentence_labels.jsonl``
(written by reading each greedy answer, before any judge's verdict was looked at) and with the
judges ``contains``, ``rouge``, ``f1``, ``em`` and ``nli`` (the trained tiny NLI model, which
knows only its own facts). It prints, per judge, the accuracy, the agreement with the hand
labels and the AUROC difference MARS - LN of each measure with its paired 95% interval.

The hand labels belong to the greedy answers they were written for: a greedy answer that
differs (other weights, another machine's arithmetic) stops the script with the list.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LABELS = ROOT / "data" / "sentence_labels.jsonl"
JUDGES = ("contains", "rouge", "f1", "em", "nli")


def write_data(path: Path) -> None:
    from mars_demo.devtools.tiny.trained import load_facts

    rows = []
    for k, fact in enumerate(load_facts(), 1):
        refs = list(dict.fromkeys(m.entity_text for m in fact.correct))
        rows.append({"id": f"tiny-{k:02d}", "question": fact.question, "answers": refs})
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text + (ROOT / "data" / "facts.jsonl").read_text(encoding="utf-8"),
                    encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=str(ROOT / "tiny-models" / "trained"))
    parser.add_argument("--out", default=str(ROOT / "runs" / "sentence-judges"))
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)

    from mars_demo.devtools.tiny import make_tiny_models
    from mars_demo.evaluation.judges import make_judge
    from mars_demo.evaluation.rejudge import rejudge
    from mars_demo.evaluation.run import EvalConfig, evaluate
    from mars_demo.settings import Settings

    models = Path(args.models)
    if not (models / "nli").is_dir():
        print(f"building the trained tiny models in {models} ...", file=sys.stderr)
        make_tiny_models(models, trained=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data.jsonl"
    write_data(data)
    settings = Settings(llm=str(models / "llm"), importance=str(models / "importance"),
                        nli=str(models / "nli"), samples=5, max_new_tokens=32,
                        temperature=0.5, seed=0)
    quiet = lambda message: None  # noqa: E731
    first = out / "answers"  # resumed when there; the re-judged runs are made again
    for name in ("hand", *JUDGES):
        shutil.rmtree(out / name, ignore_errors=True)
    evaluate(EvalConfig(data=str(data), out=first, judge=make_judge("contains"),
                        settings=settings, resamples=args.bootstrap, plots=False,
                        messages=quiet))
    answers = {json.loads(x)["id"]: json.loads(x)["greedy"]
               for x in (first / "results.jsonl").read_text(encoding="utf-8").splitlines()}
    labels = [json.loads(x) for x in LABELS.read_text(encoding="utf-8").splitlines()]
    other = [f"{row['id']}: labelled {row['greedy']!r}, answered {answers.get(row['id'])!r}"
             for row in labels if answers.get(row["id"]) != row["greedy"]]
    if other:
        print("the greedy answers are not the labelled ones:\n  " + "\n  ".join(other),
              file=sys.stderr)
        return 1
    runs = {"hand labels": rejudge(first, out / "hand", None, labels_file=str(LABELS),
                                   resamples=args.bootstrap, plots=False, messages=quiet)}
    human = {row["id"]: row["correct"] for row in labels}
    verdicts = {}
    for name in JUDGES:
        judge = make_judge(name, settings=settings)
        runs[name] = rejudge(first, out / name, judge, resamples=args.bootstrap, plots=False,
                             messages=quiet)
        verdicts[name] = {json.loads(x)["id"]: json.loads(x)["correct"] for x in (
            out / name / "results.jsonl").read_text(encoding="utf-8").splitlines()}
    print("| judge | accuracy | agreement with the hand labels | AUROC MARS - LN x100 [95%]: "
          "Confidence, Entropy, SE |\n|---|---|---|---|")
    for name, report in runs.items():
        if name in verdicts:
            agree = sum(verdicts[name][k] == v for k, v in human.items()) / len(human)
            shown = f"{agree * 100:.1f}%"
        else:
            shown = "-"
        diffs = []
        for m in ("confidence", "entropy", "semantic_entropy"):
            e = report.metrics["auroc"][m]["mars_minus_length_normalized"]
            diffs.append("n/a" if e.value is None else f"{e.value * 100:+.1f} "
                         f"[{e.ci95[0] * 100:+.1f}, {e.ci95[1] * 100:+.1f}]"
                         if e.ci95 else f"{e.value * 100:+.1f}")
        print(f"| {name} | {report.accuracy * 100:.1f}% | {shown} | {'; '.join(diffs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
