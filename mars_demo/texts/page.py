"""The page's own strings: header, banner, input, settings, answer, tables, plots, progress,
``app.py``, the controls, pasted answers and the API (see :mod:`mars_demo.texts`)."""

from __future__ import annotations

# --- page header -------------------------------------------------------------------------------

TITLE = "MARS Demo: should you trust this answer?"
INTRO = (
    "Ask a short factual question: a language model answers it and samples more answers. The "
    "page says whether they agree, and how uncertain the answer is with **MARS** (Meaning-Aware "
    "Response Scoring, [Bakman et al., ACL 2024](https://arxiv.org/abs/2402.11756)), which "
    "weighs each token by how much it matters to the meaning, and without it. "
    "**Higher uncertainty = less trustworthy**."
)

# --- banner: models and device -----------------------------------------------------------------

BANNER_MODELS = "Models: LLM <b>{llm}</b> · importance <b>{importance}</b> · NLI <b>{nli}</b>{optional} · device <b>{device}</b>{quant}"
# an optional model (SAR's similarity model...), named only on a page whose methods run it
BANNER_OPTIONAL_MODEL = " · {label} <b>{name}</b>"
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
ASK_BUSY = "Working…"  # Ask while a question of this page runs (it takes no click then)
ASK_STARTED = "Analysis started: the page is working out the answer and its verdict."
# a press of Ask (or Enter, or an example) while this page's question runs
ASK_STILL_WORKING = (
    "Still working on the first question; ask the next one when its verdict is shown."
)
SKIP_TO_ANSWER = "Skip to the answer"
SCROLL_REGION = "Table (scrolls sideways)"  # the name of a table box that scrolls (page.js)
EXAMPLES_LABEL = "Examples (a click asks one):"

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
    "(linked under the settings); TruthTorchLM: the MARS choices of the authors' library."
)
RECIPE_LINK = "The recipes' choices: {link}."

# --- links (ui/page/links.py): the paper, its code, this page's docs and code, a link to share it ---

LINKS_LINE = "Links: {links}"
LINK_PAPER = "the paper"
LINK_PAPER_CODE = "the paper's published code"
LINK_PAPER_CODE_DOC = "the paper's code, point by point"
LINK_DOCS = "this page's documentation"
LINK_CODE = "this page's code"
LINK_SHARE = "a link to share this page"
RECIPE_CHOICES = [
    ("default", "default"),
    ("paper's published code", "paper-code"),
    ("TruthTorchLM 0.1.19", "truthtorchlm"),
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

SCORING_LABEL = "Scoring (recolors the tokens and highlights its column; nothing is recomputed)"
SCORING_NAMES = {
    "length_normalized": "Length-normalized",
    "mars": "MARS",
}

# --- answer ------------------------------------------------------------------------------------

ANSWER_HEADING = "Answer"
ANSWER_SECTION_HEADING = "Verdict and answer"
DETAILS_HEADING = "Details of this answer"
ANSWER_PLACEHOLDER = "The answer appears here, token by token, as the model writes it."
ANSWER_STREAMING = "Generating…"
ANSWER_WAITING = "Waiting for the answer…"  # at the press, before the server answers
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
ANSWER_MORE = "Its scores, and why MARS weighs it as it does"
CHART_DRAWING = "Drawing the chart…"  # where a chart will be, until the browser has drawn it
LEGEND_LOW = "low weight"
LEGEND_HIGH = "high weight"
SHADE_LABEL = "Color the answer by"
SHADE_NAMES = {"weight": "MARS weight", "probability": "token probability",
               "entropy": "token entropy"}
#: per shade: the bar's two ends and what the colors mean
LEGENDS = {
    "weight": (LEGEND_LOW, LEGEND_HIGH, LEGEND),
    "probability": ("probable", "improbable", (
        "Color = how improbable each token was when the model wrote it (1 − its probability): "
        "the stronger the color, the less sure the model was of that very token. Boxes are "
        "the phrases the importance model found.")),
    "entropy": ("sure", "hesitant", (
        "Color = the entropy of the model's next-token distribution at each token: the "
        "stronger the color, the more the model hesitated between tokens there (scale: the "
        "answer's largest entropy, at least one bit). Answers given without it are not "
        "colored; through a server the entropy comes from its top log-probs (a lower "
        "bound).")),
}

# a token's details (hover, focus or tap), in words
TOKEN_TITLE = (
    "\u201c{token}\u201d: the model gave it a {prob} chance as it wrote it.\n"
    "It carries {weight} of the answer's weight under {scoring} scoring ({uniform} if every "
    "token weighed the same).\n{phrase_line}"
)
TOKEN_TITLE_PHRASE = (
    "Part of \u201c{phrase}\u201d, which the importance model rates {score} for the meaning "
    "(it gets {weight} of the importance)."
)
TOKEN_TITLE_NO_PHRASE = "In no phrase the importance model found, so it gets no importance."

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
SAMPLES_SUMMARY = "{samples} {answers} in {meanings} {meaning_word}"
PHRASES_SUMMARY = "{count} phrase{s}; the heaviest \"{phrase}\" (weight {weight})"
PHRASES_SUMMARY_NONE = "no phrase found"
METHODS_SUMMARY = "{count} more method{s}, each with what it measures"
METHODS_SUMMARY_NONE = "none computed"
SCORE_TITLE = "exp(score) = {prob:.3f}"

# --- uncertainty -------------------------------------------------------------------------------

UNCERTAINTY_HEADING = "How uncertain is it?"
UNCERTAINTY_COLUMNS = ("Uncertainty (higher = less trustworthy)", "Length-normalized", "MARS")
# each measure by what it is about; the paper's name for it in the line under it
UNCERTAINTY_ROWS = {
    "confidence": ("Doubt in this answer",
                   "the paper's Confidence: minus the answer's score"),
    "entropy": ("Doubt over all tries",
                "the paper's Entropy: minus the mean score of the sampled answers"),
    "semantic_entropy": ("Doubt over meanings",
                         "the paper's Semantic entropy: the spread of the sampled answers over "
                         "meaning clusters"),
}
UNCERTAINTY_NO_RUN = (
    "Natural logs, 0 = no doubt at all. These values have no fixed scale of their own: they rank "
    "answers (higher = less trustworthy) rather than say how likely one is right."
)
UNCERTAINTY_RUN = (
    "Under each value: where it falls among the {n} answers of the evaluation run \"{run}\" "
    "(the share of them with a lower value, for the same measure and scoring)."
)

# --- plots -------------------------------------------------------------------------------------

PLOT_UNCERTAINTY_TITLE = "Uncertainty (higher = less trustworthy)"
PLOT_UNCERTAINTY_Y = "uncertainty"
PLOT_UNCERTAINTY_CAPTION = (
    "The chart draws the table's rows Doubt in this answer, Doubt over all tries and Doubt over "
    "meanings (LN: length-normalized), each on a fixed scale in nats: a bar starts at no doubt "
    "(0; for Doubt over meanings, minus the log of the number of sampled answers, −1.61 for 5, "
    "which is why the paper's semantic entropy can be negative) and grows with doubt up to 3 "
    "nats past it (a 5% chance per token). A longer bar is always more doubt; a value past the "
    "end is drawn to it and marked ▸."
)
PLOT_CLUSTERS_TITLE = "Meaning clusters of the sampled answers"
PLOT_CLUSTERS_Y = "probability share"
PLOT_CLUSTERS_NOTE = (
    "Each cluster's mass exp(logsumexp of its members' scores), normalized over the clusters."
)
PLOT_CLUSTER_NAME = "cluster {number}"
# the cluster the greedy answer is placed in (the verdict's placement), on the chart and tables
PLOT_CLUSTER_ANSWER = "{name}, the answer's"
SAMPLES_SAME_MEANING = "same meaning as the answer"
CLUSTERS_TABLE_COLUMNS = ("Meaning", "Answers", "LN share", "MARS share")
NLI_TABLE_SUMMARY = "The verdicts as a table"
NLI_TABLE_CORNER = "Premise \\ hypothesis"
NLI_TABLE_NONE = "Fewer than two sampled answers: nothing to compare."
PLOT_CLUSTER_HOVER = "{members} answer(s):"
PLOT_NLI_TITLE = "Same meaning? NLI verdicts between the sampled answers"
PLOT_NLI_LABELS = {
    "entailment": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
}
PLOT_NLI_PREMISE = "premise"  # the axes' ticks are the sampled answers' numbers
PLOT_NLI_HYPOTHESIS = "hypothesis"
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
    "methods": "Other uncertainty methods",
}
PROGRESS_TOTAL = "Done. Total {seconds:.2f} s"
PROGRESS_LABEL = "Progress of the analysis"
STAGE_SECONDS = "{seconds:.2f} s"
DOWNLOAD_BUTTON = "Download the analysis (JSON)"
DOWNLOAD_FILENAME = "mars-analysis.json"
WARNINGS_HEADING = "Warnings ({count})"
WARNINGS_MORE = "{count} more"

ERROR_BAD_INPUT = "Please check the input: {error}."
ERROR_NOT_READY = "The models are still loading ({stage}: {percent}%). Try again in a moment."
ERROR_NOT_READY_START = "The models are still loading. Try again in a moment."
ERROR_LOAD_FAILED = (
    "The models could not be loaded, so nothing can be analyzed. {error} The page's host can "
    "restart it with other models."
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
APP_ZEROGPU_LOG = (
    "ZeroGPU Space: loading the models now, before the page serves; each analysis gets a GPU "
    "through @spaces.GPU"
)


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
    "warnings, schema_version, methods (the other uncertainty methods asked for with the "
    "methods parameter). Uncertainty values: higher = less trustworthy."
)
API_SCORE_DOC = (
    "Score answers made anywhere (no generation) and return the analysis JSON.\n\n"
    "Answers without token log-probs are read by the loaded LLM (a teacher-forced pass); "
    "settings.logprob_source says where the log-probs came from. The generation options "
    "(samples, temperature, ...) are ignored here."
)

