#!/usr/bin/env bash
# Installs a Claude Code release used by the end-to-end tests (tests/it/claude_code.rs) under
# target/claude-code-<version>/. The tests use two: 2.1.112, the oldest supported and the last
# pure-JS build (cli.js, Node >= 18), and a recent pin (a ~400 MB native binary from the
# platform package npm installs beside it). The tests run the same install when one is missing.
# CLAUDE_CODE_VERSION=latest installs what the registry serves today.
set -euo pipefail
VERSION="${CLAUDE_CODE_VERSION:-2.1.112}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: install Node.js (>= 18) and npm to run the Claude Code end-to-end test" >&2
  exit 1
fi
if [ "$VERSION" = latest ]; then VERSION="$(npm view @anthropic-ai/claude-code version)"; fi
PREFIX="$ROOT/target/claude-code-$VERSION"
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund "@anthropic-ai/claude-code@$VERSION"
echo "installed Claude Code $VERSION: $PREFIX/node_modules/.bin/claude"
