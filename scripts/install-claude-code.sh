#!/usr/bin/env bash
# Installs the pinned Claude Code CLI used by the end-to-end test (tests/it/claude_code.rs)
# under target/claude-code/. 2.1.112 is the last pure-JS build (cli.js, Node >= 18); later
# versions ship a ~400 MB native binary. The test runs the same install when it is missing.
set -euo pipefail
VERSION="${CLAUDE_CODE_VERSION:-2.1.112}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="$ROOT/target/claude-code"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: install Node.js (>= 18) and npm to run the Claude Code end-to-end test" >&2
  exit 1
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund "@anthropic-ai/claude-code@$VERSION"
echo "installed: $PREFIX/node_modules/.bin/claude"
