#!/usr/bin/env bash
# Debian's Chromium and its WebDriver for the dashboard's browser tests (tests/e2e) and PNG
# export. Non-interactive; does nothing when both are already installed.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "install-browser: chromium and chromedriver already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q chromium chromium-driver
/usr/bin/chromium --version
