"""The strings of the Evaluation view and of the answer explained (see :mod:`mars_demo.texts`)."""

from __future__ import annotations

# --- the Evaluation view (mars_demo/ui/views/eval_view.py) --------------------------------------------

EVAL_TAB = "Evaluation: does MARS help on labelled questions?"
# the run's answer in one sentence (#mars-run-verdict); points = AUROC x 100
EVAL_VERDICT = (
    "Does MARS help here? {answer}: on these {n} questions ({llm}), MARS scoring moved the "
    "AUROC by {parts} (paired 95% intervals)."
)
EVAL_VERDICT_PART = "{diff} points for {measure} [{low}, {high}]"
EVAL_VERDICT_HELPS = "Yes"
EVAL_VERDICT_SOME = "Somewhat (for some measures; the others show no clear difference)"
EVAL_VERDICT_HURTS = "No, it did worse"
EVAL_VERDICT_WORSE = "No (worse for some measures; the others show no clear difference)"
EVAL_VERDICT_MIXED = "Mixed (better for some measures, worse for others)"
EVAL_VERDICT_UNCLEAR = "No clear difference (every interval holds zero)"
EVAL_EXPLAIN = (
    "An evaluation run asks the model many questions whose right answers are known, and "
    "measures how well each uncertainty predicts a wrong answer: AUROC (0.5 = chance, "
    "1 = perfect), AUPRC (wrong answers as positive), PRR (0 = random, 1 = perfect rejection) and "
    "AURAC (accuracy as the most uncertain answers are rejected), with 95% bootstrap intervals "
    "in brackets, like the paper's Table 1. Open a run of this server, or upload a run's "
    "report.json for the tables and its results.jsonl for the curves (at most {limit} each). "
    "Uploaded files are removed from the server within two hours; other visitors never see them."
)
EVAL_RUN_LABEL = "A run on this server"
EVAL_RUN_CHOICE = "{run} ({llm})"
EVAL_REPORT_LABEL = "report.json"
EVAL_RESULTS_LABEL = "results.jsonl (optional: for the curves)"
EVAL_OPEN_BUTTON = "Show"
EVAL_NOTHING = "Choose a run above, or upload a run's report.json, then Show."
EVAL_NOTHING_UPLOAD = "Upload a run's report.json (and its results.jsonl for the curves), then Show."
EVAL_REPORT_FIRST = "Upload the run's report.json too: results.jsonl alone gives no table."
EVAL_TOP_TITLE = "ROC of the best methods, by AUROC"
EVAL_CURVES_WORDS = (
    "Their numbers are in the tables above: the area under each ROC curve is its AUROC, the "
    "area under each rejection curve its AURAC."
)
EVAL_ROC_TITLE = "ROC: each uncertainty predicting a wrong answer"
EVAL_REJECTION_TITLE = "Rejection curves: accuracy as the most uncertain answers are left out"
EVAL_BAD_REPORT = "This is not a readable evaluation report: {error}"
EVAL_BAD_RESULTS = "The results file cannot be used for the curves: {error}"
EVAL_TOO_BIG = "{name} is {size} bytes; this page reads at most {limit} bytes"
EVAL_UNKNOWN_RUN = "There is no run {name!r} on this server"
EVAL_CURVES_FROM = (
    "Curves drawn from {source}: {n} questions (the table above comes from report.json)."
)
EVAL_SCORING_SUFFIX = {"length_normalized": " (LN)", "mars": " + MARS"}
EVAL_LABELS_GIVEN = "; {given} labels given, {judged} judged"
EVAL_ALL_LABELS_GIVEN = "all {given} labels given"
EVAL_JUDGE_CHECK = (
    "On the judge check {file} (n = {n}) this judge agreed with the human labels on "
    "{agreement:.1f}% ({accepts} false accepts, {rejects} false rejects)."
)
EVAL_TABLE_NOTE = (
    "Values x100 with the 95% percentile bootstrap interval ({resamples} resamples); each "
    "uncertainty predicts a wrong answer."
)
EVAL_PAIRED_CAPTION = (
    "MARS minus length-normalized per measure, with the paired bootstrap interval (both on the "
    "same resampled questions):"
)
EVAL_METHODS_CAPTION = (
    "Every method of the run, ranked by AUROC (best first), x100 with the 95% bootstrap "
    "interval; the last column is each row's AUROC minus that of the best MARS row, {best}, "
    "with the paired bootstrap interval (both on the same resampled questions). A method whose "
    "figures tell nothing (the same value for every answer, or an interval of zero width) is "
    "not ranked, and says why:"
)
EVAL_NOT_RANKED = "Not ranked: {why}."
EVAL_CAUTION = "Caution: {why}."
EVAL_ZERO_WIDTH = "(zero width)"
EVAL_METHODS_VS_BEST = "AUROC − best MARS"
EVAL_CALIBRATION = (
    "Calibration of {method}, held out by {folds}-fold cross-validation: Brier score "
    "{brier:.3f} (the accuracy alone: {constant:.3f}), expected calibration error {ece:.3f}."
)
EVAL_NO_CURVES = (
    "No curves: they need the run's results.jsonl (one line per question with its correctness "
    "and uncertainties), which was not given."
)
EVAL_MISMATCH = (
    "The results file has {n_results} questions and the report {n_report}: they are not from "
    "the same run, so the curves are not drawn."
)

# --- the verdict under the answer (mars_demo/verdict.py) ----------------------------------------

VERDICT_BADGES = {"consistent": "Consistent", "mostly": "Mostly consistent", "unsure": "Unsure",
                  "few": "Too few tries"}
VERDICT_TRY = "other try"
VERDICT_TRIES = "other tries"
VERDICT_ANSWER = "answer"
VERDICT_ANSWERS = "answers"
# what the sampled answers showed: one sentence each, in plain words (the clusters are in the
# fold); which answers mean the same is the NLI model's reading, and the sentence says so
VERDICT_ALL = (
    "By the NLI model, all {samples} {tries} mean the same as this answer: the model gives it "
    "every time."
)
VERDICT_ALL_NLI = (
    "By the NLI model, all {samples} {tries} mean the same as this answer, in other words."
)
VERDICT_SOME = (
    "By the NLI model, {agreeing} of {samples} {tries} mean the same as this answer; it reads "
    "the other {rest} as saying something else."
)
VERDICT_SPLIT = (
    "By the NLI model, the {samples} {tries} give {meanings} different {answers}; {agreeing} of "
    "them {mean} the same as this one."
)
VERDICT_UNPLACED = (
    "By the NLI model, none of the {samples} {tries} means the same as this answer (they give "
    "{meanings} different {answers})."
)
VERDICT_FEW = "Only {samples} {tries}: too few to tell whether the model keeps to this answer."
VERDICT_SCORINGS_DISAGREE = "Its two scorings disagree on which of its answers is the most likely."
# how sure the model was of the words that matter (the answer's MARS score per token)
# (the percent is the chance it gave them: "unsure ... (37% on average)" read as 37% unsure)
VERDICT_SURE = "It was sure of the words that matter: it gave them a {percent} chance on average."
VERDICT_FAIRLY_SURE = (
    "It was fairly sure of the words that matter: it gave them a {percent} chance on average.")
VERDICT_UNSURE_WORDS = (
    "It was unsure of the words that matter: it gave them a {percent} chance on average.")
# without a calibration: what agreement does not show, and what the visitor can do
VERDICT_ADVICE = {
    "consistent": "That does not show it is right: a model can repeat a wrong answer.",
    "mostly": "That does not show it is right; check it before you rely on it.",
    "unsure": "Do not rely on it without checking it.",
    "few": "Ask again with more sampled answers (Settings) for a verdict.",
}
VERDICT_CALIBRATED = "About {percent}% likely right (calibrated on {data}{questions})."
# how answers at this level fared in the page's evaluation run: said only where the run tells
# the levels apart (mars_demo/verdict.py, MIN_LEVEL_ANSWERS), beside the run's overall record
VERDICT_RUN_JUDGED = " (judged by {judge})"
VERDICT_RUN_TELLS = (
    "On the evaluation run {run}{judged}, {overall} of its {total} answers were right; of those "
    "the page called {level}, {share} (n = {n}; 95% interval {low} to {high})."
)
VERDICT_RUN_FEW = (
    "The evaluation run {run}{judged} cannot tell this level from the others: it holds {n} "
    "{answers} the page called {level} and {others} at other levels, and at least {least} of "
    "each are needed."
)
VERDICT_RUN_ALIKE = (
    "The evaluation run {run}{judged} cannot tell this level from the others: its answers the "
    "page called {level} were right neither more nor less often than the rest beyond chance "
    "(their 95% intervals overlap)."
)
VERDICT_RUN_LENIENT = (
    " Its judge, {judge}, is lenient: it counts an answer right when it shares enough words "
    "with a reference, so some wrong answers count as right and these shares run high."
)
VERDICT_RECORD_OTHER = (
    " That run's answers were made otherwise ({what}), so this is only a rough guide."
)
VERDICT_NOT_RIGHT = (
    "Agreement is not correctness: a model can give the same wrong answer every time. Only a "
    "calibration on labelled questions turns the numbers into a chance of being right."
)
VERDICT_DETAILS = "How the page judges this"
EXAMPLE_KEPT = (
    "This example's analysis was made once, with the page's default settings, and kept: it is "
    "shown whole, at once."
)
VERDICT_DONE = "Analysis done."
VERDICT_WORKING = "Working out the verdict on this answer…"
VERDICT_EXPECTED = (
    " Analyses here took about {seconds} s lately (the median of the last {count})."
)
VERDICT_EXPECTED_LIKE = (
    " Analyses like this one ({samples} sampled answers of up to {tokens} tokens) took about "
    "{seconds} s here lately (the median of the last {count})."
)
VERDICT_OVERRUN = " This one is taking longer: {elapsed} s so far."
VERDICT_HOW = (
    "The page asks the model the same question again several times (the sampled answers) and "
    "counts how many of those answers the NLI model puts in the same meaning cluster as this "
    "answer (placed by the sampled answers with the same words or, where none has them, by "
    "those the NLI model finds this answer entails). It checks whether MARS and "
    "length-normalized scoring find the same meaning the most likely, and says how probable the "
    "model found the words that matter (the answer's MARS score per token). Levels: consistent "
    "(every try in the answer's cluster), mostly consistent (more than half, both scorings "
    "agreeing), unsure (fewer, none placed, or the scorings disagree), too few tries (fewer than "
    "3)."
)

# --- why MARS differs: the answer explained (mars_demo/ui/draw/render.py) -----------------------------

WHY_LESS = (
    "MARS finds this answer less trustworthy than length-normalized scoring: confidence "
    "uncertainty {mars:.3f} vs {ln:.3f} (+{diff:.3f} nats)."
)
WHY_MORE = (
    "MARS finds this answer more trustworthy than length-normalized scoring: confidence "
    "uncertainty {mars:.3f} vs {ln:.3f} (−{diff:.3f} nats)."
)
WHY_SAME = (
    "MARS and length-normalized scoring agree on this answer: confidence uncertainty {mars:.3f} "
    "vs {ln:.3f} (a difference below 0.0005 nats)."
)
WHY_BECAUSE = (
    " The largest part of the difference comes from the token {token} (probability {prob:.2f}): "
    "it carries {u:.1%} of the importance u, against the 1/L = {uniform:.1%} that every token "
    "gets under length-normalized scoring, so MARS counts it {direction}."
)
WHY_MORE_WEIGHT = "more"
WHY_LESS_WEIGHT = "less"
# where the greedy answer falls among the samples' meanings: the verdict's own placement
# (mars_demo/verdict.py, placement), said here with the samples that placed it
GREEDY_CLUSTER = (
    "Meaning: the NLI model clusters only the sampled answers, not the greedy one; {matched} "
    "the same words as the greedy answer, so it is placed in {clusters}, with {members} ({share} "
    "of the {scoring} probability mass of the samples)."
)
GREEDY_CLUSTER_NLI = (
    "Meaning: the NLI model clusters only the sampled answers, not the greedy one; none has its "
    "words, and the NLI model finds that it entails {matched}, so it is placed in "
    "{clusters}{most}, with {members} ({share} of the {scoring} probability mass of the samples)."
)
GREEDY_CLUSTER_MOST = ", where most of them are"
GREEDY_CLUSTER_NONE = (
    "Meaning: the NLI model clusters only the sampled answers, not the greedy one; no sampled "
    "answer has the same words and the NLI model finds it entails none of them, so the greedy "
    "answer is in no cluster here."
)

TOKENS_LABEL = "Token by token: where the two scores differ"
TOKENS_EXPLAIN = (
    "Each token's log-probability log p and importance u, its weight under length-normalized "
    "scoring (1/L) and under MARS (w = 1/(2L) + u/2), and what it adds to each score (weight × "
    "log p). The last row adds them up: the two scores of the answer."
)
TOKENS_COLUMNS = ("#", "Token", "log p", "p", "Importance u", "Phrase", "LN weight 1/L",
                  "MARS weight w", "LN: w × log p", "MARS: w × log p")
TOKENS_TOTAL = "Sum (the score)"
TOKENS_EMPTY = "(empty)"

CONTEXT_LABEL = "Prompt and settings behind this result"
CONTEXT_PROMPT = "Prompt the language model read"
CONTEXT_NO_PROMPT = "(no prompt recorded: the answers were pasted or came from elsewhere)"
CONTEXT_SETTINGS = "Settings of this analysis"
CONTEXT_NAMES = {
    "llm": "Language model",
    "importance": "Importance model",
    "nli": "NLI model",
    "recipe": "Recipe",
    "prompt": "Prompt preset",
    "samples": "Sampled answers",
    "temperature": "Sampling temperature",
    "max_new_tokens": "Max new tokens",
    "seed": "Seed",
    "importance_method": "Importance method",
    "normalization": "Phrase-score normalization",
    "softmax_temperature": "Softmax temperature",
    "distribution": "Phrase weight to tokens",
    "cluster_rule": "Same-meaning rule",
    "end_token": "End token in token-level methods",
    "nli_pairs": "Pairs the NLI model judged",
    "logprob_source": "Token log-probs from",
}
CONTEXT_UNSET = "(default)"

FORMULAS_LABEL = "Formulas"
FORMULAS = (
    "Natural logs; every uncertainty: higher = less trustworthy. An answer of L tokens with "
    "probabilities p_l; B sampled answers; C the meaning clusters of the samples.",
    ("Length-normalized score", "LN = (1/L) Σ_l log p_l"),
    ("MARS token weight", "w_l = 1/(2L) + u_l/2, with u_l ≥ 0 and Σ_l u_l = 1"),
    ("MARS score", "MARS = Σ_l w_l log p_l"),
    ("Confidence", "−score(greedy answer)"),
    ("Entropy", "−(1/B) Σ_b score(sample_b)"),
    ("Semantic entropy (paper, eq. 8)", "−(1/|C|) Σ_c log Σ_{b∈c} exp(score(sample_b))"),
    ("Semantic entropy, normalized (Farquhar et al. 2024)",
     "p(c) = Σ_{b∈c} exp(score_b) / Σ_b exp(score_b);  SE = −Σ_c p(c) log p(c), in [0, log |C|]"),
    "\"score\" is LN for the length-normalized column and MARS for the MARS column. The "
    "importance u_l of a token is its phrase's weight U_k (normalized importances) split over "
    "the phrase's tokens.",
)

# not a share itself: the entropy, in nats, of the clusters' shares of the probability
SE_NORMALIZED_ROW = (
    "Doubt over meanings, from their shares",
    "semantic entropy normalized (Farquhar et al. 2024): the entropy, in nats, of the meaning "
    "clusters' shares of the probability: 0 when one meaning holds it all, up to the log of the "
    "number of meanings (1.61 for 5) when they share it equally",
)
SE_NEGATIVE_NOTE = (
    "Semantic entropy is negative here ({values}): the paper's estimator is not a true entropy. "
    "It averages −log of each cluster's summed sample probabilities, which are not normalized, "
    "so a cluster of several probable answers sums to more than 1 and its −log is below 0. The "
    "normalized row is a true entropy of the same clusters."
)

# --- compared with other methods: the panel under the uncertainty table (ui/draw/methods_panel.py) ---

METHODS_HEADING = "Compared with other methods"
METHODS_COLUMNS = ("Method", "Length-normalized", "MARS", "Value (no scoring)")
METHODS_EXPLAIN = (
    "Other published uncertainty methods on the same sampled answers. Higher = less "
    "trustworthy, for every method. A method that reads the answers' scores is shown with "
    "length-normalized and with MARS scoring; the others have one value."
)
METHODS_NOT_COMPARABLE = (
    "The methods' raw values are on different scales, so they are not comparable across rows: "
    "only a row's length-normalized and MARS values compare. A page that holds an evaluation "
    "run shows where each value falls among that run's answers."
)
METHODS_RUN = (
    "Under each value: where it falls among the {n} answers of the evaluation run "
    "\"{run}\" (data {data}), for the same method and scoring: the share of the run's answers "
    "with a lower value. Answers with the same value are not counted as lower; their share is "
    "given apart."
)
METHODS_RUN_OTHER = (
    "That run's answers were made otherwise than this one ({what}), which changes the values' "
    "scale, so where a value falls among them is only a rough guide."
)
METHODS_RUN_MODELS = "other models"
METHODS_RUN_SETTING = "{name} {here} here, {run} in the run"
METHODS_RUN_UNRECORDED = "not recorded"  # a setting a run (or an analysis) did not keep
METHODS_RUN_UNREADABLE = (
    "The evaluation run \"{run}\" could not be read ({error}), so the values are not placed "
    "among a run's answers."
)
METHODS_RUN_NOT_FOUND = (
    "The calibration file is not inside its run's folder (run.json, report.json, "
    "results.jsonl), so no run is loaded to place the values among."
)
METHODS_PERCENTILE = "less trustworthy than {below} of the run's answers"
# where no answer of the run has a lower value: said from the other side
METHODS_PERCENTILE_ABOVE = "more trustworthy than {above} of the run's answers"
METHODS_PERCENTILE_SAME = "as high as every one of the run's answers"
METHODS_ALL = "all"  # a share of the run's answers that is the whole of them
METHODS_TIES = "as high as {ties} of them"
METHODS_PERCENTILE_TITLE = (
    "{lower} of the run's {n} answers have a lower value, {equal} the same value and {higher} a "
    "higher one"
)
METHODS_ABSENT = "not in the run: no place among its answers"
METHODS_NONE = (
    "No other methods were computed for this answer (the methods option asked for none, or the "
    "analysis was saved before they existed)."
)
