# Shared helpers of scripts/demo.sh and scripts/test.sh (sourced).
set -euo pipefail

EAI_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        echo "$0: run as root (apt-get, runsc and cgroups need it)" >&2
        exit 1
    fi
}

# apt_install PKG...: install the packages that are not installed yet.
apt_install() {
    local missing=()
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing+=("$p")
        fi
    done
    if ((${#missing[@]})); then
        echo "== apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# Build dependencies (every library comes from Debian).
# python3: tools/gen_errcodes.py generates the error code table at build time.
EAI_BUILD_PACKAGES=(build-essential cmake pkg-config python3 libevent-dev libjansson-dev libyaml-dev libssl-dev
                    libcurl4-openssl-dev libsqlite3-dev libpcre2-dev libcunit1-dev libpq-dev
                    libarchive-dev)
# What the service needs to run sandboxes and build images.
# bubblewrap: the example vendor backend (examples/isolation-example, tests/vendor).
EAI_RUN_PACKAGES=(runsc mmdebstrap ca-certificates curl jq bubblewrap)

# build_all [CMAKE ARGS...]
build_all() {
    echo "== build ($EAI_ROOT/build)"
    cmake -S "$EAI_ROOT" -B "$EAI_ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
    cmake --build "$EAI_ROOT/build" -j"$(nproc)"
}
