"""Every user-facing string of the page and of ``app.py``, in one place.

Strings with ``{placeholders}`` are filled with ``str.format``; the UI escapes every value that
comes from a question, an answer or an exception before it goes into HTML, so none of these
templates needs to care about escaping.
"""

from __future__ import annotations

# --- page header -------------------------------------------------------------------------------

TITLE = "MARS Demo: should you trust this answer?"
INTRO = (
    "Ask a short factual question. A language model answers it, then samples a few more answers. "
    "**MARS** (Meaning-Aware Response Scoring, "
    "[Bakman et al., ACL 2024](https://arxiv.org/abs/2402.11756)) scores an answer by "
    "weighting each token by how much it matters to the meaning, instead of giving every token "
    "the same weight as the usual length-normalized score does. The uncertainty values below say "
    "how far to trust the answer: **higher = less trustworthy**."
)

# --- banner: models and device -----------------------------------------------------------------

BANNER_MODELS = "Models: LLM <b>{llm}</b> · importance <b>{importance}</b> · NLI <b>{nli}</b> · device <b>{device}</b>{quant}"
BANNER_4BIT = " (4-bit)"
BANNER_CPU_FALLBACK = (
    "No GPU found: running the small CPU preset. Answers are slower and weaker than with the 7B "
    "models of the paper; the scoring and the uncertainty values work the same way."
)
BANNER_LOADING = "Loading the models ({stage}: {percent}%). You can type a question meanwhile; Ask works once they are ready."
BANNER_LOADING_START = (
    "Loading the models. You can type a question meanwhile; Ask works once they are ready."
)
BANNER_LOAD_FAILED = "The models could not be loaded: {error}"
BANNER_READY = "Models ready."

# --- input -------------------------------------------------------------------------------------

QUESTION_LABEL = "Question"
QUESTION_PLACEHOLDER = "e.g. Which planet is known as the Red Planet?"
ASK_BUTTON = "Ask"
EXAMPLES_LABEL = "Examples (click one, then Ask):"

# --- settings ----------------------------------------------------------------------------------

SETTINGS_LABEL = "Settings"
SAMPLES_LABEL = "Sampled answers"
SAMPLES_INFO = "More samples = a better estimate of entropy and semantic entropy, and a slower answer (5 in the paper)."
TEMPERATURE_LABEL = "Sampling temperature"
TEMPERATURE_INFO = (
    "Randomness of the sampled answers (0.5 in the paper). The greedy answer is always greedy."
)
MAX_NEW_TOKENS_LABEL = "Max new tokens"
MAX_NEW_TOKENS_INFO = (
    "Longest answer, in tokens. With the paper's prompt, answers also stop at the first '.' or "
    "line break; with the chat template they stop where the model ends its turn."
)
SEED_LABEL = "Seed"
SEED_INFO = "Same seed and settings = same answers."
PROMPT_LABEL = "Prompt"
PROMPT_INFO = (
    "auto: chat template for instruction-tuned models, the paper's few-shot prompt otherwise."
)
PROMPT_CHOICES = [
    ("auto", "auto"),
    ("paper (few-shot)", "paper"),
    ("chat template", "chat"),
]
IMPORTANCE_LABEL = "Importance method"
IMPORTANCE_INFO = "How much each phrase matters to the meaning."
IMPORTANCE_CHOICES = [
    ("trained MARS model (fast, the paper's)", "model"),
    ("one phrase per token (same model)", "token"),
    ("BEM masking (slow, paper's Algorithm 1)", "bem"),
]
NORMALIZATION_LABEL = "Phrase-score normalization"
NORMALIZATION_INFO = (
    "sum: U_k = s_k / sum s (paper's code); softmax: temperature 0.1 (later library)."
)
DISTRIBUTION_LABEL = "Phrase weight to tokens"
DISTRIBUTION_INFO = "equal: split over the phrase's tokens (paper); max / min: all to its least / most probable token."
CLUSTER_RULE_LABEL = "Same-meaning rule"
CLUSTER_RULE_INFO = (
    "strict: entailment both ways (paper); lenient: no contradiction either way (original code)."
)

RECIPE_LABEL = "Recipe"
RECIPE_INFO = (
    "default: this project's documented choices; paper-code: the published code's choices "
    "(see the README's table)."
)
RECIPE_CHOICES = [
    ("default", "default"),
    ("paper's published code", "paper-code"),
]
RESCORED_NOTE = "Re-scored the same answers with {changes}; nothing was generated again."

MODEL_LABEL = "Language model"
MODEL_INFO = (
    "Everyone using this page shares one model: switching changes it for all visitors, not just "
    "for you. It frees the current model before loading the new one. Gated models need HF_TOKEN."
)
MODEL_CUSTOM = "{model} (from the command line)"
MODEL_GATED = " (gated)"
LOAD_MODEL_BUTTON = "Load this model"
SWITCH_STARTED = "Freeing the current model and loading {model}…"
SWITCH_PROGRESS = "Loading {model}: {stage} ({percent}%)"
SWITCH_DONE = "Loaded {model}."

# --- scoring toggle ----------------------------------------------------------------------------

SCORING_LABEL = "Scoring"
SCORING_INFO = "Recolors the tokens and highlights the matching column; nothing is recomputed."
SCORING_NAMES = {
    "length_normalized": "Length-normalized",
    "mars": "MARS",
}

# --- answer ------------------------------------------------------------------------------------

ANSWER_HEADING = "Answer"
ANSWER_PLACEHOLDER = "The answer appears here, token by token, as the model writes it."
ANSWER_STREAMING = "Generating…"
ANSWER_EMPTY = "(the model produced an empty answer)"
ANSWER_TRUNCATED = "Stopped at the token limit (max new tokens); the answer may be cut off."
ANSWER_SCORES = "Score of this answer (natural log, higher = more likely):"
LEGEND = (
    "Color = the token's weight in the active score: the stronger the color, the more the token "
    "counts (see the bar: left = low, right = high). "
    "Length-normalized gives every token the same weight 1/L; MARS gives important tokens more. "
    "Boxes are the phrases the importance model found. Hover or tap a token for its details, "
    "or Tab to the answer and move between its tokens with the arrow keys."
)
ANSWER_TOKENS_ARIA = "The answer, token by token: the left and right arrow keys move between its tokens"
LEGEND_LOW = "low weight"
LEGEND_HIGH = "high weight"

TOKEN_TITLE = (
    "token {token}\n"
    "probability {prob:.3f} (log {logprob:.3f})\n"
    "{phrase_line}\n"
    "weight {weight:.3f} ({scoring}); MARS {mars:.3f}, length-normalized {uniform:.3f}"
)
TOKEN_TITLE_PHRASE = "phrase {phrase}: importance {score:.3f}, phrase weight {weight:.3f}"
TOKEN_TITLE_NO_PHRASE = "not part of any phrase (weight 1/(2L) only)"

# --- phrase table ------------------------------------------------------------------------------

PHRASES_HEADING = "Phrases of the answer"
PHRASES_EXPLAIN = (
    "Importance is the importance method's raw score; the phrase weight U is its share after "
    "normalization. The last two columns say how much of each score comes from the phrase."
)
PHRASES_COLUMNS = (
    "#",
    "Phrase",
    "Importance",
    "Phrase weight U",
    "Share of LN score",
    "Share of MARS score",
)
PHRASES_NONE = "The importance method found no phrase in this answer (see the warnings)."
PHRASES_OUTSIDE = "(tokens outside any phrase)"

# --- sampled answers ---------------------------------------------------------------------------

SAMPLES_HEADING = "Sampled answers"
SAMPLES_EXPLAIN = (
    "Answers sampled at the chosen temperature, grouped into clusters of the same meaning by the NLI "
    "model. Scores are natural logs: closer to 0 = more likely."
)
SAMPLES_COLUMNS = ("#", "Answer", "Cluster", "Length-normalized", "MARS")
SAMPLES_NONE = "No sampled answers."
SCORE_TITLE = "exp(score) = {prob:.3f}"

# --- uncertainty -------------------------------------------------------------------------------

UNCERTAINTY_HEADING = "Should you trust it?"
UNCERTAINTY_EXPLAIN = "Higher = less trustworthy. Each measure is shown with the length-normalized score (baseline) and with MARS."
UNCERTAINTY_COLUMNS = ("Measure", "Length-normalized", "MARS")
UNCERTAINTY_ROWS = {
    "confidence": ("Confidence", "minus the greedy answer's score"),
    "entropy": ("Entropy", "minus the mean score of the sampled answers"),
    "semantic_entropy": ("Semantic entropy", "spread over meaning clusters of the sampled answers"),
}

# --- plots -------------------------------------------------------------------------------------

PLOT_UNCERTAINTY_TITLE = "Uncertainty (higher = less trustworthy)"
PLOT_UNCERTAINTY_Y = "uncertainty"
PLOT_CLUSTERS_TITLE = "Meaning clusters of the sampled answers"
PLOT_CLUSTERS_Y = "probability share"
PLOT_CLUSTERS_NOTE = (
    "Each cluster's mass exp(logsumexp of its members' scores), normalized over the clusters."
)
PLOT_CLUSTER_NAME = "cluster {number}"
PLOT_CLUSTER_HOVER = "{members} answer(s):"
PLOT_NLI_TITLE = "Same meaning? NLI verdicts between the sampled answers"
PLOT_NLI_LABELS = {
    "entailment": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
}
PLOT_NLI_PREMISE = "premise (sampled answer #)"
PLOT_NLI_HYPOTHESIS = "hypothesis (sampled answer #)"
PLOT_NLI_HOVER = "premise: {premise}<br>hypothesis: {hypothesis}<br>verdict: {label}"

# --- progress, timings, download, warnings, errors ---------------------------------------------

STAGES = {
    "generate": "Generate answers",
    "importance": "Token importance",
    "nli": "NLI clustering",
    "uncertainty": "Uncertainty",
}
STAGES_EXTRA = {  # other entries of timings_s
    "load": "Load models",
    "logprobs": "Token probabilities",
    "alignment": "Align phrases to tokens",
    "teacher_forced": "Token probabilities (read by the model)",
}
PROGRESS_TOTAL = "Total {seconds:.2f} s"
STAGE_SECONDS = "{seconds:.2f} s"
DOWNLOAD_BUTTON = "Download the analysis (JSON)"
DOWNLOAD_FILENAME = "mars-analysis.json"
WARNINGS_HEADING = "Warnings ({count})"
WARNINGS_MORE = "{count} more"

ERROR_BAD_INPUT = "Please check the input: {error}."
ERROR_NOT_READY = "The models are still loading ({stage}: {percent}%). Try again in a moment."
ERROR_NOT_READY_START = "The models are still loading. Try again in a moment."
ERROR_LOAD_FAILED = (
    "The models could not be loaded, so nothing can be analyzed. {error} "
    "Restart the app with other models (python app.py --llm ...), or pick another language "
    "model under Settings where the page offers the switch (--allow-model-switch)."
)
ERROR_MODEL = "{error}"
ERROR_OUT_OF_MEMORY = (
    "The model ran out of memory on this question. Try fewer sampled answers, fewer max new "
    "tokens or a smaller model; the page keeps working."
)
ERROR_CANCELLED = "The analysis was cancelled before it finished. Ask again to run it."
ERROR_DOWNLOAD = (
    "The analysis is shown, but its JSON download could not be written ({error}). Ask again to "
    "retry, or use the /analyze API for the JSON."
)
ERROR_UNEXPECTED = "Something went wrong while analyzing the question ({error}). The page keeps working; please try again."

# --- app.py ------------------------------------------------------------------------------------

APP_DESCRIPTION = (
    "Serve the MARS Demo page: ask a question, see the answer colored by token importance, the "
    "sampled answers, their meaning clusters and the uncertainty values with and without MARS. "
    "Every option can also be set with the environment variable named in its help."
)
APP_HELP_LLM = "LLM: a preset name, a Hub id or a local directory (default: a 7B model in 4-bit on a GPU, the small CPU preset otherwise) [env MARS_DEMO_LLM]"
APP_HELP_IMPORTANCE = "importance model: a Hub id or a local directory (default: %(default)s) [env MARS_DEMO_IMPORTANCE]"
APP_HELP_NLI = "NLI model: a Hub id or a local directory (default: deberta-large-mnli on a GPU, deberta-base-mnli on CPU) [env MARS_DEMO_NLI]"
APP_HELP_HOST = (
    "address to listen on (default: 127.0.0.1, or $GRADIO_SERVER_NAME) [env MARS_DEMO_HOST]"
)
APP_HELP_PORT = "port to listen on (default: 7860, or $GRADIO_SERVER_PORT) [env MARS_DEMO_PORT]"
APP_HELP_SHARE = "also serve through a public *.gradio.live link [env MARS_DEMO_SHARE: 1/0, true/false, yes/no, on/off]"
APP_HELP_4BIT = (
    "load the LLM in 4-bit NF4 (--4bit) or unquantized: bf16 or fp16 on a GPU (--no-4bit); "
    "default: 4-bit on a GPU, except on ZeroGPU [env MARS_DEMO_LOAD_IN_4BIT: 1/0, true/false, "
    "yes/no, on/off]"
)
APP_ZEROGPU_LOG = (
    "ZeroGPU Space: loading the models now, before the page serves; each analysis gets a GPU "
    "through @spaces.GPU"
)
APP_BAD_BOOL = "{name} must be one of 1, 0, true, false, yes, no, on, off; got {value!r}"
APP_BAD_PORT = "{name} must be a port number from 1 to 65535; got {value!r}"


# --- the page's controls, by option name (ranges and defaults come from mars_demo.options) ------

OPTION_TEXTS = {
    "samples": (SAMPLES_LABEL, SAMPLES_INFO),
    "temperature": (TEMPERATURE_LABEL, TEMPERATURE_INFO),
    "max_new_tokens": (MAX_NEW_TOKENS_LABEL, MAX_NEW_TOKENS_INFO),
    "seed": (SEED_LABEL, SEED_INFO),
    "prompt": (PROMPT_LABEL, PROMPT_INFO),
    "importance_method": (IMPORTANCE_LABEL, IMPORTANCE_INFO),
    "normalization": (NORMALIZATION_LABEL, NORMALIZATION_INFO),
    "distribution": (DISTRIBUTION_LABEL, DISTRIBUTION_INFO),
    "cluster_rule": (CLUSTER_RULE_LABEL, CLUSTER_RULE_INFO),
    "recipe": (RECIPE_LABEL, RECIPE_INFO),
}
OPTION_CHOICES = {
    "prompt": PROMPT_CHOICES,
    # sum-softmax (the published medical run) needs its own temperature: the CLI and API offer it
    "normalization": [("sum", "sum"), ("softmax", "softmax")],
    "importance_method": IMPORTANCE_CHOICES,
    "recipe": RECIPE_CHOICES,
}

# --- score your own answers ---------------------------------------------------------------------

OWN_LABEL = "Score your own answers"
OWN_EXPLAIN = (
    "Paste answers made anywhere (another model, a chat, a log) to the question above. Without "
    "token log-probs, the loaded model reads each answer (a teacher-forced pass) to get them, "
    "and the result says so."
)
OWN_GREEDY_LABEL = "Main answer (the greedy one)"
OWN_GREEDY_PLACEHOLDER = "e.g. Mars is known as the Red Planet."
OWN_SAMPLES_LABEL = "Sampled answers, one per line"
OWN_SAMPLES_PLACEHOLDER = "e.g.\nMars.\nIt is Mars.\nJupiter."
OWN_JSON_LABEL = "Or an answer set as JSON, with token log-probs (optional; replaces the boxes above)"
OWN_JSON_PLACEHOLDER = (
    '{"question": "...", "greedy": {"text": "Mars", "tokens": [{"text": "Mars", "logprob": -0.1}]},'
    ' "samples": [...]}'
)
OWN_BUTTON = "Score these answers"
OWN_NO_SAMPLES = "give at least one sampled answer (one per line)"
OWN_NO_GREEDY = "give the main answer"
OWN_TOO_MANY = "at most {limit} sampled answers on this page; got {count}"
OWN_TOO_LONG = "the answers are {size} characters long; the limit on this page is {limit}"
OWN_BAD_JSON = "the answer set is not valid JSON ({error})"

# --- the API ------------------------------------------------------------------------------------

API_FIRST_PARAMS = {
    "question": "the question, at most 1000 characters",
    "answers": (
        "the answer set as JSON text or an object: question, greedy, samples; each answer its "
        "text (a string) or an object with text and tokens [{text, logprob}] (the names of the "
        "analysis JSON)"
    ),
}
API_ANALYZE_DOC = (
    "Analyze one question with MARS and return the whole analysis as JSON.\n\n"
    "The result has the fields of mars_demo.result.AnalysisResult.to_dict(): question, prompt, "
    "prompt_token_ids, greedy, samples, nli, cluster_ids, uncertainty, settings, timings_s, "
    "warnings, schema_version. Uncertainty values: higher = less trustworthy."
)
API_SCORE_DOC = (
    "Score answers made anywhere (no generation) and return the analysis JSON.\n\n"
    "Answers without token log-probs are read by the loaded LLM (a teacher-forced pass); "
    "settings.logprob_source says where the log-probs came from. The generation options "
    "(samples, temperature, ...) are ignored here."
)

# --- public mode and per-visitor limits (mars_demo/access.py) ------------------------------------

ACCESS_NO_BEM = (
    "importance_method bem is not available on this server: its two models were not set up by "
    "the host (app.py --bem DIR --chunker DIR). Use model or token"
)
ACCESS_TOO_MUCH = (
    "samples x max_new_tokens is {samples} x {tokens} = {work}; this public page allows at most "
    "{limit} per question. Use fewer sampled answers or fewer max new tokens"
)
ACCESS_ONE_AT_A_TIME = (
    "You already have an analysis running or waiting on this public page. Wait for it to finish "
    "(or cancel it), then ask again."
)
ACCESS_TOO_MUCH_PASTED = (
    "the pasted samples x the longest sample are {samples} x {chars} = {work} characters; this "
    "public page allows at most {limit} (the cost of its heaviest question). Paste fewer or "
    "shorter samples"
)
ACCESS_TOO_MANY_EVENTS = (
    "This public page is still working on your last requests. Wait for them to finish, then try "
    "again."
)
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
ACCESS_SWITCH_OFF = (
    "Switching models is off on this page: the host chooses the models when starting the app "
    "(python app.py --llm ..., or --allow-model-switch on a page only the host can open)."
)
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
APP_HELP_BEM = (
    "answer-equivalence model of BEM importance: a local directory (or, on a page only you can "
    "open, a Hub id). BEM is offered only when --bem and --chunker are both given [env MARS_DEMO_BEM]"
)
APP_HELP_CHUNKER = (
    "Flair phrase chunker of BEM importance: a local directory or .pt file (or, on a page only "
    "you can open, a Hub id such as flair/chunk-english) [env MARS_DEMO_CHUNKER]"
)
APP_HELP_ALLOW_SWITCH = (
    "show the language-model switch on the page (only on a page only you can open; refused with "
    "--share, a non-loopback --host or on a Space) [env MARS_DEMO_ALLOW_MODEL_SWITCH]"
)
APP_HELP_MAX_SAMPLE_TOKENS = (
    "public pages: the most sampled answers x max new tokens one question may ask for; 0 = no "
    "limit (default: %(default)s) [env MARS_DEMO_MAX_SAMPLE_TOKENS]"
)
APP_HELP_PER_CLIENT = (
    "public pages: analyses one client (IP address) may have running or waiting at once; 0 = no "
    "limit (default: %(default)s) [env MARS_DEMO_PER_CLIENT]"
)
APP_BAD_COUNT = "{name} must be a whole number from 0 up; got {value!r}"
APP_PUBLIC_LOG = (
    "public page ({reasons}): model switch off, at most {limit} sample tokens and {per_client} "
    "queued analysis per client; clients identified by {identity}"
)
APP_HELP_TRUSTED_PROXY = (
    "a reverse proxy in front of the page (an IP address or network; repeat for several), which "
    "appends the client to X-Forwarded-For (nginx: $proxy_add_x_forwarded_for); a public page "
    "then identifies its clients by that header [env MARS_DEMO_TRUSTED_PROXIES, comma-separated]"
)
APP_HELP_MODEL_NAME = (
    "the {model} model's name on the page and in its results, instead of its folder's name "
    "[env MARS_DEMO_{variable}_NAME]"
)
# The queue line over a waiting visitor's answer box (ui/assets/page.js rewrites Gradio's
# "queue: 2/3 | 4.1/9.0s" into it).
QUEUE_PLACE = "In line: number {place} of {size} waiting (the models answer one question at a time)."
QUEUE_ESTIMATE = " Waited {elapsed} s; estimated {eta} s."
QUEUE_ELAPSED = " Waited {elapsed} s."

# --- displays that must not mislead -------------------------------------------------------------

SCORING_SHORT = {"length_normalized": "LN", "mars": "MARS"}  # x labels of the uncertainty panels
PLOT_NLI_SELF = "answer #{number} with itself: not compared (blank)<br>{answer}"
PLOT_NLI_IDENTICAL = "{label} (identical texts: not run through the NLI model)"
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

# --- calibration: a chance of being right (mars_demo/ui/trust.py, app.py --calibration) ----------

APP_HELP_CALIBRATION = (
    "a calibration file made by `python -m mars_demo evaluate --calibrate RUN_DIR`: the page and "
    "the API then show each answer's chance of being right; it must be made with the models "
    "loaded here [env MARS_DEMO_CALIBRATION]"
)
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
    "How to read the numbers: <b>lower uncertainty = more trustworthy</b>. In the paper's tests "
    "(Table 1), MARS scoring predicted wrong answers better than length-normalized scoring for "
    "Confidence, Entropy and Semantic Entropy (AUROC up 1 to 6 points), and Semantic Entropy did "
    "best. A value alone is not a probability of being right: it only ranks answers; a "
    "calibration on labelled questions would turn it into one, and this page has none."
)
# Only on a page the host opens: how to give the page a calibration.
TRUST_HOST_HINT = " (Host: start the app with <code>--calibration FILE</code>.)"
MEASURE_NAMES = {"confidence": "Confidence", "entropy": "Entropy",
                 "semantic_entropy": "Semantic Entropy"}
API_CALIBRATION_DOC = (
    "\n\nThis server has a calibration: the result also has a field calibration = "
    "{chance_correct, uncertainty, measure, scoring, data, n, accuracy, auroc, judge, models, "
    "source}; chance_correct is null, with a reason, for answers of other models."
)

# --- the Evaluation view (mars_demo/ui/evaluation.py) --------------------------------------------

EVAL_TAB = "Evaluation: does MARS help on labelled questions?"
EVAL_EXPLAIN = (
    "Open an evaluation run made by `python -m mars_demo evaluate --data SOURCE --out RUN_DIR`: "
    "its report.json gives the tables, like the paper's Table 1: how well each uncertainty "
    "predicts a wrong answer as AUROC (0.5 = chance, 1 = perfect), AUPRC (wrong answers as "
    "positive), PRR (0 = random, 1 = perfect rejection) and AURAC (accuracy as the most "
    "uncertain answers are rejected), with 95% bootstrap intervals in brackets. "
    "The curves need the run's results.jsonl too. Uploads are "
    "limited to {limit}. Uploaded files are removed from the server by its cache cleanup within "
    "two hours; other visitors never see them."
)
EVAL_RUN_LABEL = "A run on this server"
EVAL_REPORT_LABEL = "report.json"
EVAL_RESULTS_LABEL = "results.jsonl (optional: for the curves)"
EVAL_OPEN_BUTTON = "Show"
EVAL_NOTHING = "Choose a run, or upload its report.json."
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

# --- why MARS differs: the answer explained (mars_demo/ui/render.py) -----------------------------

VERDICT_LESS = (
    "MARS finds this answer less trustworthy than length-normalized scoring: confidence "
    "uncertainty {mars:.3f} vs {ln:.3f} (+{diff:.3f} nats)."
)
VERDICT_MORE = (
    "MARS finds this answer more trustworthy than length-normalized scoring: confidence "
    "uncertainty {mars:.3f} vs {ln:.3f} (−{diff:.3f} nats)."
)
VERDICT_SAME = (
    "MARS and length-normalized scoring agree on this answer: confidence uncertainty {mars:.3f} "
    "vs {ln:.3f} (a difference below 0.0005 nats)."
)
VERDICT_BECAUSE = (
    " The largest part of the difference comes from the token {token} (probability {prob:.2f}): "
    "it carries {u:.1%} of the importance u, against the 1/L = {uniform:.1%} that every token "
    "gets under length-normalized scoring, so MARS counts it {direction}."
)
VERDICT_MORE_WEIGHT = "more"
VERDICT_LESS_WEIGHT = "less"
GREEDY_CLUSTER = (
    "Meaning cluster: the NLI model clusters only the sampled answers, not the greedy one; "
    "{samples} the same text as the greedy answer and {are} in {clusters} "
    "({share} of the {scoring} probability mass of the samples)."
)
GREEDY_CLUSTER_NONE = (
    "Meaning cluster: the NLI model clusters only the sampled answers, not the greedy one, and "
    "no sampled answer has the same text, so the greedy answer is in no cluster here."
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
CONTEXT_SETTINGS = "Settings"
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

SE_NORMALIZED_ROW = (
    "Semantic entropy, normalized",
    "the entropy of the cluster masses (Farquhar et al. 2024), between 0 and log |C|",
)
SE_NEGATIVE_NOTE = (
    "Semantic entropy is negative here ({values}): the paper's estimator is not a true entropy. "
    "It averages −log of each cluster's summed sample probabilities, which are not normalized, "
    "so a cluster of several probable answers sums to more than 1 and its −log is below 0. The "
    "normalized row is a true entropy of the same clusters."
)
