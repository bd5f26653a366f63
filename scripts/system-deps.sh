#!/usr/bin/env bash
# Installs the Debian packages the test suite needs (and the real node uses), only when one is missing.
# redis-server: the tests of rate limits and sessions shared by several gateway replicas start their own.
set -euo pipefail
packages=(postgresql git wrk graphviz redis-server)
# bubblewrap: the local sandbox of every MCP server process (docs/security.md).
packages+=(bubblewrap)
# The web console's end-to-end tests drive Debian's Chromium with Playwright (never a downloaded browser).
packages+=(chromium)
# The real node (`dev-cluster up --real-node`, `make image`, `make test-realnode`).
packages+=(containerd runc containernetworking-plugins iptables conntrack socat iproute2 debootstrap umoci)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system-deps: all present (${packages[*]})"
  exit 0
fi
echo "system-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
