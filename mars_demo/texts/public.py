"""The strings of a public page: per-visitor limits, displays that must not mislead, and the
chance of being right (see :mod:`mars_demo.texts`)."""

from __future__ import annotations

# --- public mode and per-visitor limits (mars_demo/hosting/access.py) ------------------------------------

ACCESS_METHODS_NOT_OFFERED = (
    "method(s) {methods} are not offered on this server (they need an extra model or LLM pass); "
    "offered: {offered}"
)
ACCESS_NO_BEM = (
    "importance_method bem is not available on this server: its two models were not set up by "
    "the host. Use model or token"
)
ACCESS_TOO_MUCH = (
    "samples x max_new_tokens is {samples} x {tokens} = {work}; this public page allows at most "
    "{limit} per question ({over} over). Use fewer sampled answers or fewer max new tokens"
)
ACCESS_ONE_AT_A_TIME = (
    "You already have an analysis running or waiting on this public page. Wait for it to finish "
    "(or cancel it), then ask again."
)
ACCESS_TOO_MUCH_PASTED = (
    "the pasted samples x the longest answer (the main answer included) are {samples} x {chars} "
    "= {work} characters; this public page allows at most {limit} (the cost of its heaviest "
    "question), {over} over. Paste fewer or shorter answers"
)
ACCESS_TOO_MUCH_TOKENS = (
    "the pasted samples x the longest answer (the main answer included) are {samples} x {tokens} "
    "= {work} tokens of the LLM; this public page allows at most {limit} (the cost of its "
    "heaviest question), {over} over. Paste fewer or shorter answers"
)
ACCESS_PROMPT_TOO_LONG = (
    "the prompt of the pasted answers is {size} {unit}; this public page allows at most {limit} "
    "({over} over). Give a shorter prompt, or leave prompt_token_ids out to use the prompt built "
    "from the question"
)
ACCESS_TOO_MANY_EVENTS = (
    "This public page is still working on your last requests. Wait for them to finish, then try "
    "again."
)
ACCESS_TOO_MANY_CONNECTIONS = (
    "At most {limit} open connections per visitor on this public page; close some and try again."
)
ACCESS_FOREIGN_ORIGIN = (
    "This public page answers only its own web pages, not a page of {origin}. (The host may name "
    "other web sites in its settings; a proxy in front of it must pass the Host header on.)"
)
ACCESS_TOO_FAST = (
    "You are sending requests faster than this public page serves them to one visitor. Wait a "
    "moment, then try again."
)
ACCESS_UNKNOWN_HOST = (
    "This page is not served under the name {host}. (The host names the page's addresses in "
    "its settings.)"
)
ACCESS_BAD_HOST = "--public-host {value!r} is not a host name or address (e.g. mars.example.org)"
ACCESS_BODY_TOO_BIG = "A request may be at most {limit:,} bytes on this public page."
ACCESS_ONE_FILE = "One file per upload on this public page."
ACCESS_NO_URLS = (
    "A file must be uploaded, not named by its address: this page never fetches anything from "
    "the web."
)
ACCESS_BAD_PROXY = (
    "--trusted-proxy {value!r} is not an IP address or network (e.g. 127.0.0.1 or 10.0.0.0/8)"
)
ACCESS_UPLOADS_PER_HOUR = (
    "At most {limit} uploads an hour per visitor on this public page; try again later."
)
ACCESS_SWITCH_PUBLIC = (
    "--allow-model-switch is for a page only you can open: this page is public ({reasons}), and "
    "there a visitor's switch would change the models of every other visitor. Choose the models "
    "with --llm, --importance, --nli, --bem and --chunker instead."
)
ACCESS_SWITCH_OFF = "Switching models is off on this page: the host chooses the models."
ACCESS_BEM_BOTH = "BEM needs both of its models: give --bem and --chunker together"
ACCESS_BEM_LOCAL = (
    "{flag} {value!r} is not a local path: a public page must not download models when a "
    "visitor picks BEM. Download it first (e.g. huggingface-cli download) and pass the folder"
)
ACCESS_PUBLIC_NOTE = (
    "This is a public page: the models are fixed by the host, and each question may use at "
    "most {limit} sampled-answer tokens (sampled answers x max new tokens)."
)
# Under the sliders of a public page, kept up to date in the browser (ui/assets/page.js).
ACCESS_WORK_NOTE = "This public page allows sampled answers × max new tokens ≤ {limit}: now {work}."
ACCESS_WORK_OVER = "{work} is over this page's {limit}: use fewer sampled answers or fewer tokens."
ACCESS_PUBLIC_NOTE_NO_LIMIT = "This is a public page: the models are fixed by the host."
ACCESS_UNKNOWN_MODEL = (
    "{model!r} is not one of this page's language models; pick one from the list"
)
APP_PUBLIC_LOG = (
    "public page ({reasons}): model switch off, at most {limit} sample tokens and {per_client} "
    "queued analysis per client; clients identified by {identity}"
)
# The queue line over a waiting visitor's answer box (ui/assets/page.js rewrites Gradio's
# "queue: 2/3 | 4.1/9.0s" into it, without Gradio's estimate: a guess it cannot stand behind).
QUEUE_PLACE = "In line: number {place} of {size} waiting (the models answer one question at a time)."
QUEUE_ELAPSED = " Waited {elapsed} s."

# --- displays that must not mislead -------------------------------------------------------------

SCORING_SHORT = {"length_normalized": "LN", "mars": "MARS"}  # x labels of the uncertainty panels
PLOT_NLI_SELF = ("answer #{number} with itself: {label}; the clustering does not read it "
                 "(blank)<br>{answer}")
PLOT_NLI_BY_RULE = "{label} (identical texts: decided by the rule, not the model)"
PLOT_NLI_NOT_JUDGED = ("answer #{premise} against #{hypothesis}: not judged (the clustering did "
                       "not need this pair)")
NLI_TABLE_NOT_JUDGED = "not judged"
PHRASES_WEIGHT_SUM = (
    "Phrase weight U = importance / the sum of the importances of the phrases that hold tokens "
    "({total:.3f}), so the weights add up to 1."
)
PHRASES_WEIGHT_SOFTMAX = (
    "Phrase weight U = softmax(importance / T) with T = {t:g}: every 0.1 of importance below "
    "the top phrase ({top:.3f}) divides the weight by e^(0.1/T) = {factor:.3g}, so a phrase "
    "well below the top one gets a weight near 0 even with a sizeable importance."
)
PHRASE_NO_TOKEN = (
    "no token: the LLM's tokens over this phrase belong to another phrase, so its weight went "
    "to the others (see the warnings)"
)
PHRASE_SOFTMAX_SMALL = (
    "softmax: e^(({score:.3f} − {top:.3f}) / {t:g}) = {ratio:.1e} of the top phrase's weight"
)
PHRASES_WEIGHT_SUM_SOFTMAX = (
    "Phrase weight U = softmax((importance / {total:.3f}) / T) with T = {t:g} (the importances "
    "are first divided by their sum): every 0.1 of that share below the top phrase divides the "
    "weight by e^(0.1/T) = {factor:.3g}."
)
PHRASE_SUM_SOFTMAX_SMALL = (
    "sum-softmax: e^(({score:.3f} − {top:.3f}) / {total:.3f} / {t:g}) = {ratio:.1e} of the top "
    "phrase's weight"
)

# --- calibration: a chance of being right (mars_demo/ui/draw/trust.py, app.py --calibration) ----------

APP_CALIBRATION_MODELS = "--calibration {path}: {error}"
APP_CALIBRATION_LLM_LATER = (
    "--calibration: the served LLM's name is known only once the server answers (give "
    "--llm-model to check it at start); answers of another model get no chance estimate"
)
TRUST_CHANCE = "About <b>{percent}%</b> likely to be right."
TRUST_SOURCE = (
    "Estimated from this answer's {measure} ({scoring}) = {value}, by an isotonic calibration on "
    "{data} (n = {n} questions, {accuracy} right, judge {judge}; AUROC of that uncertainty there "
    "{auroc}). It holds for questions like those and for these models and settings."
)
TRUST_UNINFORMATIVE = (
    " Careful: the calibration's answers were all right or all wrong (its AUROC is undefined), so "
    "it gives every answer about the same chance."
)
TRUST_OTHER_MODELS = "it was made or scored by other models than the calibration's"
TRUST_NO_CHANCE = "No chance of being right for this answer: {reason}."
TRUST_WORDS = (
    "How to read the numbers: <b>lower uncertainty = more trustworthy</b>. In the MARS paper "
    "(Bakman et al., ACL 2024, Table 1: 7B and 13B models such as Llama-2-7B and Mistral-7B on "
    "TriviaQA and other question sets), MARS scoring predicted wrong answers better than "
    "length-normalized scoring for Confidence, Entropy and Semantic Entropy (AUROC up 1 to 6 "
    "points), and Semantic Entropy did best; with other models and questions it may differ (the "
    "Evaluation view shows a run's own numbers). A value alone is not a probability of being "
    "right: it only ranks answers; a calibration on labelled questions would turn it into one, "
    "and this page has none."
)
TRUST_NO_SCORING = "no scoring"  # a calibrated method that reads no sequence score
MEASURE_NAMES = {"confidence": "Confidence", "entropy": "Entropy",
                 "semantic_entropy": "Semantic Entropy"}
API_CALIBRATION_DOC = (
    "\n\nThis server has a calibration: the result also has a field calibration = "
    "{chance_correct, uncertainty, measure, scoring, data, n, accuracy, auroc, judge, models, "
    "source}; chance_correct is null, with a reason, for answers of other models."
)

