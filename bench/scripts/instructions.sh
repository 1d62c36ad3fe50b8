#!/usr/bin/env bash
# Instructions per request of a sluice binary, counted by valgrind's callgrind: a figure that
# does not move with the machine's load, for A/B comparisons of request-path changes on a noisy
# (virtual) machine, where req/s and CPU time drift by a quarter between runs.
#
#   bench/scripts/instructions.sh [SLUICE_BINARY] [REQUESTS]
#
# Starts `sluice-bench mock`, runs the binary under callgrind with one runtime worker, warms
# it up with 200 requests, counts the next REQUESTS (default 2000) keep-alive non-streaming
# Anthropic requests (4 client connections, 0.5 KB replies) and prints instructions per
# request, all threads together (the request-log writer included). The callgrind output is
# kept under $OUT (default target/instructions/) for callgrind_annotate.
# SCALE=PxM (e.g. SCALE=50x200) routes through P providers × M models instead: one combo per
# model, the requested one chosen at random per request (S5's state scaling, counted).
# Needs valgrind (apt-get install valgrind) and python3; build first with
# `cargo build --release -p sluice -p sluice-bench`.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/release/sluice}
n=${2:-2000}
out=${OUT:-target/instructions}
rm -rf "$out" && mkdir -p "$out/logs"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mock_port=$(port); listen=$(port); admin=$(port)
scale=${SCALE:-}
providers=${scale%x*}; models=${scale#*x}
cat > "$out/config.toml" <<CFG
[server]
listen = "127.0.0.1:$listen"
[admin]
listen = "127.0.0.1:$admin"
[store]
path = "$out/state.db"
[log]
dir = "$out/logs"
level = "warn"
[routing]
default_provider = ["mock"]
[[providers]]
id = "mock"
dialect = "anthropic"
base_url = "http://127.0.0.1:$mock_port"
  [[providers.connections]]
  id = "m1"
  auth = "passthrough"
CFG
if [ -n "$scale" ]; then
  python3 - "$providers" "$models" "$mock_port" >> "$out/config.toml" <<'PY'
import sys
p, m, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for i in range(p):
    print(f'[[providers]]\nid = "p{i}"\ndialect = "anthropic"\nbase_url = "http://127.0.0.1:{port}"\n'
          f'  [[providers.connections]]\n  id = "p{i}c1"\n  auth = "passthrough"')
for i in range(p):
    for j in range(m):
        print(f'[[combos]]\nname = "m{i}-{j}"\ntargets = ["p{i}/claude-{j}"]')
PY
fi
target/release/sluice-bench mock --listen "127.0.0.1:$mock_port" > "$out/mock.log" 2>&1 &
mock=$!
TOKIO_WORKER_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.%p" \
  "$bin" --config "$out/config.toml" --no-console > "$out/sluice.log" 2>&1 &
sluice=$!
trap 'kill $sluice $mock 2>/dev/null || true' EXIT
load() {
  python3 - "$listen" "$1" "${providers:-0}" "${models:-0}" <<'PY'
import http.client, json, random, sys, threading
port, n, p, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def body(model):
    return json.dumps({"model": model, "max_tokens": 64, "stream": False, "bench": "s=500",
                       "messages": [{"role": "user", "content": "Say hello in one short sentence, please."}]})
rng = random.Random(7)
def pick():
    return body(f"m{rng.randrange(p)}-{rng.randrange(m)}") if p else body("claude-bench")
bad = []
def run(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for _ in range(k):
        c.request("POST", "/v1/messages", pick(), {"content-type": "application/json", "anthropic-version": "2023-06-01"})
        r = c.getresponse(); r.read()
        if r.status != 200: bad.append(r.status)
ts = [threading.Thread(target=run, args=(n // 4,)) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
if bad: sys.exit(f"{len(bad)} requests failed: {sorted(set(bad))}")
PY
}
for _ in $(seq 1 120); do
  (exec 3<>"/dev/tcp/127.0.0.1/$listen") 2>/dev/null && break
  sleep 0.5
done
load 200
callgrind_control -z "$sluice" > /dev/null 2>&1
load "$n"
callgrind_control -d "$sluice" > /dev/null 2>&1
for _ in $(seq 1 50); do
  ls "$out"/callgrind.*.1 > /dev/null 2>&1 && break
  sleep 0.2
done
dump=$(ls "$out"/callgrind.*.1)
total=$(grep -m1 '^summary:' "$dump" | awk '{print $2}')
echo "$bin: $total instructions for $n requests = $((total / n)) per request ($dump)"
