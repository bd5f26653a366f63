#!/usr/bin/env bash
# Anchors for vMCP performance, measured side by side on this machine with wrk (Debian):
#   9100 bare ASGI JSON-RPC (the Python floor), 9101 MCP SDK v2 MCPServer, 9102 fastmcp create_proxy -> 9101.
# The bare endpoint and the SDK server are the backends bench/vmcp.py measures (bench/vmcp_backends.py).
# Runs from the anchors' own venv (VENV, default bench/anchors/.venv, created by setup.sh when missing).
# Needs wrk (apt-get install -y wrk, or `make system-deps`). Usage: bench/anchors/anchor-mcp.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench=$(dirname "$here")  # absolute: vmcp_backends.py drops exactly this folder from sys.path
venv=${VENV:-$here/.venv}
command -v wrk >/dev/null || { echo "wrk is required: apt-get install -y wrk" >&2; exit 1; }
[ -x "$venv/bin/python" ] || "$here/setup.sh" "$venv" || exit 1
py=$venv/bin/python
pids=()
tmp=$(mktemp -d)
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
# Started servers answer on their port within 60 s (a loaded machine is slow to import the SDK).
ready() { for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done
  echo "port $1 did not open (see $tmp/$1.log)" >&2; cat "$tmp/$1.log" >&2; exit 1; }
$py "$bench/vmcp_backends.py" bare 9100 >"$tmp/9100.log" 2>&1 & pids+=($!)
$py "$bench/vmcp_backends.py" sdk 9101 >"$tmp/9101.log" 2>&1 & pids+=($!)
ready 9100; ready 9101
$py "$here/fm_proxy.py" 9102 http://127.0.0.1:9101/mcp >"$tmp/9102.log" 2>&1 & pids+=($!)
ready 9102
sid() { curl -s -i -X POST "http://127.0.0.1:$1/mcp" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}' | grep -i mcp-session-id | awk '{print $2}' | tr -d '\r'; }
for p in 9100 9101 9102; do
  S=$(sid $p)
  cat > "$tmp/call.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Protocol-Version"] = "2025-11-25"
wrk.headers["Mcp-Session-Id"] = "$S"
LUA
  for c in 1 16; do
    printf 'port %s c%s: ' "$p" "$c"
    wrk -t$([ $c = 1 ] && echo 1 || echo 2) -c$c -d5s --latency -s "$tmp/call.lua" "http://127.0.0.1:$p/mcp" | awk '/ 50%/{p50=$2} / 99%/{p99=$2} /Requests\/sec/{rps=$2} /Non-2xx/{bad=$NF} END{print "p50="p50" p99="p99" rps="rps" non2xx="(bad?bad:0)}'
  done
done
