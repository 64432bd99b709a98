#!/usr/bin/env bash
# Fetches kvserve's public test data into ../shared (or --dest DIR) from the upstream sources in
# scripts/test-data-sources.json, each checked against its sha256; --verify checks a copy.
# See scripts/fetch_test_data.py --help.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/fetch_test_data.py" "$@"
