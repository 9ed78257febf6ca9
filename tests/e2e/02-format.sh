#!/usr/bin/env bash
# Style by machine: every C file of the tree is as clang-format (with the
# tree's .clang-format) leaves it. `make format` rewrites them.
set -euo pipefail
source "$(dirname "$0")/../functions.sh"
command -v clang-format >/dev/null || fail "clang-format not found: make test-deps installs it"
requires git
cd "$(dirname "$0")/../.."
mapfile -t files < <(git ls-files '*.c' '*.h')
[ "${#files[@]}" -gt 100 ] || fail "only ${#files[@]} C files listed: not a checkout?"
if ! clang-format --dry-run -Werror "${files[@]}" 2>"$TEST_DIR/fmt.err"; then
	grep -m 20 "error:" "$TEST_DIR/fmt.err" || true
	fail "$(grep -c "error:" "$TEST_DIR/fmt.err") lines differ from clang-format: run make format"
fi
echo "${#files[@]} files as clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1) leaves them"
