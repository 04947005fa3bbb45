# Sourced by the scripts: makes `uv` available on a machine that has only python3 and pip,
# and keeps uv on the system interpreter (it may not download Python builds here).
export UV_PYTHON_DOWNLOADS=never
if ! command -v uv >/dev/null 2>&1; then
    tools="${PYSANDBOXES_TOOLS:-$HOME/.cache/pysandboxes-tools}"
    if [ ! -x "$tools/bin/uv" ]; then
        echo "uv not found: installing it into $tools" >&2
        python3 -m venv "$tools"
        "$tools/bin/python" -m pip install --quiet uv
    fi
    export PATH="$tools/bin:$PATH"
fi
