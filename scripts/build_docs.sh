#!/usr/bin/env bash
# Build the documentation site (mkdocs.yml: Material for MkDocs, mkdocstrings) with warnings as
# errors: `mkdocs build --strict`. Needs the docs extra: pip install ".[docs]". $PYTHON (default
# python3) is the interpreter that runs MkDocs.
#
#   bash scripts/build_docs.sh            # into a temporary folder, removed afterwards (a check)
#   bash scripts/build_docs.sh OUT_DIR    # into OUT_DIR (e.g. site/, which git ignores; open OUT_DIR/index.html)
#
# The API reference is read from src/ without importing it: the compiled package is not needed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$#" -gt 0 ]; then
    out="$(mkdir -p "$1" && cd "$1" && pwd)"
else
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi
cd "$root"
# NO_MKDOCS_2_WARNING: Material prints a banner about MkDocs 2.0 on every build; it is not a warning
# about this site.
NO_MKDOCS_2_WARNING=1 "${PYTHON:-python3}" -m mkdocs build --strict --clean --config-file "$root/mkdocs.yml" --site-dir "$out"
echo "site built in $out"
