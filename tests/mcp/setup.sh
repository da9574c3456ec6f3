#!/usr/bin/env bash
# The official MCP Python SDK for tests/mcp (PyPI, pinned in requirements.txt),
# in a venv cached by that file's hash under /var/cache/eai-mcp (made once,
# ~20 s; needs python3-venv and PyPI).
#   tests/mcp/setup.sh                 # make it when missing, print its python
#   tests/mcp/setup.sh --print-python  # its python if it is there, else nothing (exit 1)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hash=$(sha256sum "$here/requirements.txt" | cut -c1-12)
venv=${EAI_MCP_VENV:-/var/cache/eai-mcp/venv-$hash}
if [[ ${1:-} == --print-python ]]; then
    [[ -x $venv/bin/python && -f $venv/.complete ]] || exit 1
    echo "$venv/bin/python"
    exit 0
fi
if [[ ! -f $venv/.complete ]]; then
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
    touch "$venv/.complete"
fi
echo "$venv/bin/python"
