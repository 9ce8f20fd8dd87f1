#!/usr/bin/env bash
# Installs valkey-server from Debian's bookworm-backports suite (Valkey 8.0;
# bookworm itself has none), adding the suite to apt's sources when it is
# missing. Needs root, as the CI machine's user is. Does nothing when
# valkey-server is already on PATH.
set -euo pipefail

command -v valkey-server >/dev/null && exit 0

suite=bookworm-backports
if ! grep -rqs "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  cat >/etc/apt/sources.list.d/$suite.sources <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "$suite" valkey-server >/dev/null
# The package starts a system-wide service on the standard port; the tests run
# private servers only, so it is stopped and kept from starting again.
if command -v systemctl >/dev/null && systemctl is-active --quiet valkey-server 2>/dev/null; then
  systemctl disable --now valkey-server >/dev/null 2>&1 || true
fi
command -v valkey-server >/dev/null
