#!/bin/sh
# Install Debian packages non-interactively, running `apt-get update` once
# if the package lists are missing or the first attempt fails.
set -e
[ "$#" -gt 0 ] || exit 0
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends "$@"; then
	$SUDO apt-get update -q
	$SUDO apt-get install -y -q --no-install-recommends "$@"
fi
