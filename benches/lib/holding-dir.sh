#!/usr/bin/env bash
# Usage: benches/lib/holding-dir.sh SLOT
#
# As fresh-dir.sh (the previous run's output parked, a new empty SLOT), then one file of the
# user's put in SLOT (mine.txt): a run into a folder that holds files, which writes every file
# under a temporary name and moves it into place (docs/design.md, "What a kill leaves").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/fresh-dir.sh" "$1"
echo mine >"$1/mine.txt"
