#!/usr/bin/env bash
# Regenerates docs/configuration.md from the flag table (grpo-host --help).
set -euo pipefail
cd "$(dirname "$0")/.."
HOST="${HOST:-./build/bin/grpo-host}"
{
  echo "# Configuration reference"
  echo
  echo "Generated from the flag table by \`scripts/gen-config-reference.sh\` (the text of \`grpo-host --help\`)."
  echo "Every flag is also a key of the YAML file given with \`--config\`; the command line wins."
  echo
  echo '```text'
  "$HOST" --help
  echo '```'
} > docs/configuration.md
echo "wrote docs/configuration.md"
