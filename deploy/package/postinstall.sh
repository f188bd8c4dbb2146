#!/bin/sh
# After installing splitplane: its user, and systemd told of the units
# (enabled by the operator, once /etc/splitplane holds the configurations:
# see /usr/share/doc/splitplane/examples).
set -e
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers splitplane.conf || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
