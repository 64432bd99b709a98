# Shared by tests/tools/attention_report_browser_test.sh and scripts/head-atlas-screenshots.sh; expects
# bin, models, out, artifacts, npm_dir and chromium set (out/ existing before serve or atlas).

# ensure_puppeteer: puppeteer-core (pinned) in npm_dir, and the page checker beside it.
ensure_puppeteer() {
  if [ ! -d "$npm_dir/node_modules/puppeteer-core" ]; then
    mkdir -p "$npm_dir"
    # PUPPETEER_SKIP_DOWNLOAD: the system Chromium is the browser; nothing else is fetched.
    (cd "$npm_dir" && PUPPETEER_SKIP_DOWNLOAD=1 timeout 300 npm install --no-audit --no-fund --silent \
      puppeteer-core@24.43.1) || return 1
  fi
  cp "$(dirname "${BASH_SOURCE[0]}")/head_atlas_check.mjs" "$npm_dir/check.mjs"
}
# serve NAME MODEL [BLOCKS]: a server on a free port, its cache BLOCKS x 16 tokens (default 512);
# prints its address.
serve() {
  "$bin/server/kvserve" --model "$2" --listen 127.0.0.1:0 --port-file "$out/port.$1" \
    --set cache.num_blocks="${3:-512}" --set server.http_listen='"127.0.0.1:0"' > "$out/server.$1.log" 2>&1 &
  echo $! > "$out/pid.$1"
  for _ in $(seq 400); do [ -s "$out/port.$1" ] && break; sleep 0.05; done
  [ -s "$out/port.$1" ] || { cat "$out/server.$1.log" >&2; exit 1; }
  echo "127.0.0.1:$(cat "$out/port.$1")"
}
# text_of ADDR TOKENS: the longest prefix of the reference story that is TOKENS tokens (BOS included).
text_of() {
  local t n
  # awk reads all of the output (head would close the pipe early, and pipefail would see SIGPIPE).
  count() { "$bin/clients/kvserve-cli" --addr "$1" tokenize "$2" | awk 'NR == 1 {print NF}'; }
  t="$(cat "$models/stories260K.expected.n256.txt")"
  n=$(count "$1" "$t")
  while [ "$n" -gt "$2" ]; do t="${t%?}"; n=$(count "$1" "$t"); done
  [ "$n" = "$2" ] || { echo "no $2-token prefix" >&2; exit 1; }
  printf '%s' "$t"
}
# atlas ADDR NAME TOKENS HEADS MAX_BYTES [inspect flags]: the page and its check.
atlas() {
  local addr="$1" name="$2" tokens="$3" heads="$4" max_bytes="$5"
  shift 5
  text_of "$addr" "$tokens" > "$out/$name.txt"
  "$bin/clients/kvserve-cli" --addr "$addr" inspect --prompt-file "$out/$name.txt" --html "$artifacts/$name.html" \
    --json "$out/$name.json" "$@" > "$out/$name.table"
  head -1 "$out/$name.table" | grep -q "^$tokens tokens" || { head -3 "$out/$name.table"; exit 1; }
  local listed=$(($(wc -l < "$out/$name.table") - 4))  # two header lines, the json and report lines
  [ "$listed" = "$heads" ] || { echo "$name: expected $heads heads in the table, got $listed"; exit 1; }
  node "$npm_dir/check.mjs" "$chromium" "$artifacts/$name.html" "$out/$name.json" "$artifacts/$name.png" "$max_bytes" \
    "${ATLAS_HEIGHT:-900}" ${ATLAS_HEAD:+"$ATLAS_HEAD"}
}

