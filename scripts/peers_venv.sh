#!/usr/bin/env bash
# Builds a separate virtual environment holding the peers the project is tested and timed
# against, lm-polygraph 0.7.0 and TruthTorchLM 0.1.19, once: a venv that already imports both is
# kept. Their own dependencies (spacy, litellm, wandb, ...) go into it; torch, transformers,
# tokenizers, huggingface_hub and numpy are the project's own (a .pth file names the site-packages
# of the python that runs this script, rewritten on every call), so the peers run the very same
# model code as the project and nothing of theirs replaces the project's packages.
#   bash scripts/peers_venv.sh [DIR]       (DIR defaults to $MARS_PEERS_VENV or
#                                          ~/.cache/mars-demo/peers-lmp0.7.0-ttlm0.1.19)
# Run it with the project's venv active. Prints the venv's directory on its last line.
set -euo pipefail
POLYGRAPH=0.7.0
TRUTHTORCHLM=0.1.19
DIR="${1:-${MARS_PEERS_VENV:-$HOME/.cache/mars-demo/peers-lmp$POLYGRAPH-ttlm$TRUTHTORCHLM}}"
PYTHON="${PYTHON:-python3}"
# the project's packages the peers must share, never replace
SHARED="torch transformers tokenizers huggingface_hub numpy safetensors"

project_site() {
    "$PYTHON" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
}

link_project() {  # the project's site-packages, after the venv's own (a .pth line appends it)
    project_site > "$("$DIR/bin/python" -c \
        "import sysconfig; print(sysconfig.get_paths()['purelib'])")/mars_demo_project.pth"
}

works() {
    [ -x "$DIR/bin/python" ] || return 1
    link_project
    # LITELLM_LOCAL_MODEL_COST_MAP: litellm (TruthTorchLM's) reads its price list from its own
    # files instead of fetching it when imported
    LITELLM_LOCAL_MODEL_COST_MAP=True "$DIR/bin/python" -c "
import lm_polygraph, TruthTorchLM, torch, transformers
from importlib.metadata import version
assert version('lm_polygraph') == '$POLYGRAPH', version('lm_polygraph')
assert version('truthtorchlm') == '$TRUTHTORCHLM', version('truthtorchlm')
import sys; sys.exit(0 if torch.__file__.startswith('$(project_site)') else 1)
" >/dev/null 2>&1
}

# A python without the project's packages (the venv not active) would make every venv look
# broken and link it to the wrong packages: say so and leave the venv as it is.
if ! "$PYTHON" -c "import torch, transformers" >/dev/null 2>&1; then
    echo "$PYTHON does not import torch and transformers: activate the project's venv" \
         "(. .venv/bin/activate) and run this again; $DIR is left as it is" >&2
    exit 2
fi

if works; then
    echo "peers venv already built: $DIR" >&2
    echo "$DIR"
    exit 0
fi

echo "building the peers venv in $DIR (lm-polygraph==$POLYGRAPH, truthtorchlm==$TRUTHTORCHLM;" \
     "torch and transformers are the project's)" >&2
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
"$PYTHON" -m venv "$DIR"
link_project
# The shared packages pinned at the project's versions: pip finds them installed (through the
# .pth) and leaves them be; sentence-transformers 6 would want transformers 5.
CONSTRAINTS="$DIR/project-constraints.txt"
"$PYTHON" - "$SHARED" > "$CONSTRAINTS" <<'EOF'
import sys
from importlib.metadata import version
for name in sys.argv[1].split():
    print(f"{name}=={version(name)}")
print("sentence-transformers<6")
EOF
"$DIR/bin/pip" install --quiet --upgrade pip
"$DIR/bin/pip" install --quiet -c "$CONSTRAINTS" \
    "lm-polygraph==$POLYGRAPH" "truthtorchlm==$TRUTHTORCHLM"
# Whatever of the shared packages pip put into the venv anyway goes: the project's are used.
SITE="$("$DIR/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
for name in $SHARED; do
    rm -rf "$SITE/$name" "$SITE"/"$name"-*.dist-info
done
if ! works; then
    echo "the peers venv in $DIR does not import lm_polygraph and TruthTorchLM with the" \
         "project's torch" >&2
    exit 1
fi
echo "$DIR"
