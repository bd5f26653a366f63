"""Benchmark of policy in the data plane: Cedar authorization (100 policies) and audit, alone and
together, side by side with the baseline in one run.

1. In-process: the cost of one authorization decision (`mcpfleet.policy.cedar.Authorizer`) with 100
   policies — scoped to tools (the usual form: indexed by scope, few evaluated) and unscoped (every
   policy's condition evaluated: the worst case) — and of one audit record written to a file.
2. End to end: `tools/call` p50 / p99 at 1 client (wrk) through the vMCP gateway and through
   `mcpfleet proxy --remote`, each in four variants started together in front of the same bare
   backend — baseline, authz (100 policies), audit, authz + audit — measured in interleaved rounds
   so every variant sees the same machine load; the added p50 is the variant's median minus the
   baseline's.

    .venv/bin/python -P bench/policy.py [--duration 3] [--rounds 3] [--micro-only] [--write docs/bench-policy.md]
"""

from __future__ import annotations

import sys

# bench/ holds scripts named like stdlib modules (operator.py); never import from it by accident.
sys.path[:] = [p for p in sys.path if p.rstrip("/") != __file__.rsplit("/", 1)[0]]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from contextlib import ExitStack  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import cedarpy  # noqa: E402
import httpx  # noqa: E402

from mcpfleet.api.policy import AuditConfig  # noqa: E402
from mcpfleet.policy.audit import AuditLog, Client  # noqa: E402
from mcpfleet.policy.cedar import Authorizer  # noqa: E402
from mcpfleet.policy.config import parse_document  # noqa: E402

HERE = Path(__file__).resolve().parent
BACKENDS = HERE / "vmcp_backends.py"
PY = sys.executable
HDR = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
VARIANTS = ("baseline", "authz", "audit", "authz+audit")
LOAD_AT_START = (0.0, 0.0, 0.0)


def scoped_policies(tool: str, n: int = 100) -> list[str]:
    """n policies, one per tool (what a policy set naming its tools looks like); `tool` is permitted."""
    out = [
        f'permit(principal, action == Action::"call_tool", resource == Tool::"tool{i}") '
        f'when {{ principal.claim_roles.contains("r{i}") && context.arg_text == "x{i}" }};'
        for i in range(n - 1)
    ]
    out.append(
        f'permit(principal, action == Action::"call_tool", resource == Tool::"{tool}") when {{ context has arg_text }};'
    )
    return out


def unscoped_policies(tool: str, n: int = 100) -> list[str]:
    """n policies that do not name a resource in their scope: every condition is evaluated."""
    out = [
        f'permit(principal, action, resource) when {{ resource.name == "tool{i}" && principal.claim_roles.contains("r{i}") }};'
        for i in range(n - 1)
    ]
    out.append(f'permit(principal, action, resource) when {{ resource.name == "{tool}" }};')
    return out


def document(policies: list[str]) -> dict[str, object]:
    return {"version": "1.0", "type": "cedarv1", "cedar": {"policies": policies, "entities_json": "[]"}}


def micro(n: int = 5000) -> dict[str, float]:
    """In-process costs, CPU µs per operation (median of 5 batches).

    Side by side for 1 and 100 policies: plain `cedarpy.is_authorized` (whole policy set and
    untrimmed entities, pre-parsed handles), the previous path (scope index only), and the current
    one (scope index + trimmed attributes + decision cache) on repeated requests (cache hits),
    requests with distinct arguments (cache misses) and distinct callers (entity-cache misses too).
    """
    claims = {
        "sub": "alice",
        "iss": "https://idp.example",
        "roles": ["user", "r50"],
        "email": "a@example.com",
    }
    args = {"text": "hello"}
    out: dict[str, float] = {}
    counter = itertools.count()

    def timed(label: str, fn: object) -> None:
        batches = []
        for _ in range(5):
            # CPU time of this process: what the call costs, not how long the shared cores made it wait.
            start = time.process_time()
            for _ in range(n):
                fn()  # type: ignore[operator]
            batches.append((time.process_time() - start) / n * 1e6)
        out[label] = statistics.median(batches)

    def distinct_args() -> dict[str, str]:
        return {"text": f"hello{next(counter)}"}

    def distinct_caller() -> dict[str, object]:
        return {**claims, "sub": f"user{next(counter)}", "roles": ["user", f"r{next(counter) % 200}"]}

    for count in (1, 100):
        policies = scoped_policies("echo", count)
        doc = parse_document(document(policies), "bench")
        plain = Authorizer(doc, trim=False, cache=False)
        whole = cedarpy.PolicySet.from_str("\n".join(policies))
        principal, resource, context = plain.inputs(claims, "tool", "echo", args)
        entities = cedarpy.Entities.from_json_str(json.dumps([principal, resource]))
        request = {
            "principal": principal["uid"],
            "action": {"type": "Action", "id": "call_tool"},
            "resource": resource["uid"],
            "context": context,
        }
        assert cedarpy.is_authorized(request, whole, entities).allowed
        timed(
            f"{count} scoped: plain cedarpy (whole set)",
            lambda r=request, w=whole, e=entities: cedarpy.is_authorized(r, w, e),
        )
        timed(
            f"{count} scoped: previous (index only)",
            lambda a=plain: a.authorize(claims, "tool", "echo", args),
        )
        fast = Authorizer(doc)
        assert fast.authorize(claims, "tool", "echo", args).allowed
        timed(
            f"{count} scoped: now, repeated request", lambda a=fast: a.authorize(claims, "tool", "echo", args)
        )
        timed(
            f"{count} scoped: now, distinct arguments",
            lambda a=fast: a.authorize(claims, "tool", "echo", distinct_args()),
        )
        timed(
            f"{count} scoped: now, distinct callers",
            lambda a=fast: a.authorize(distinct_caller(), "tool", "echo", args),
        )
    for label, policies in (("scoped", scoped_policies("echo")), ("unscoped", unscoped_policies("echo"))):
        doc = parse_document(document(policies), "bench")
        for variant, authorizer in (
            ("previous", Authorizer(doc, trim=False, cache=False)),
            ("now", Authorizer(doc)),
        ):
            assert authorizer.authorize(claims, "tool", "echo", args).allowed
            assert not authorizer.authorize(claims, "tool", "tool7", args).allowed
            for verdict, tool in (("permit", "echo"), ("deny", "tool7")):
                # Distinct callers: the unscoped policies read no argument, so distinct arguments
                # would be cache hits (the trimmed context is the same).
                timed(
                    f"100 {label}: {variant}, {verdict}, distinct callers",
                    lambda a=authorizer, t=tool: a.authorize(distinct_caller(), "tool", t, args),
                )
    with tempfile.TemporaryDirectory() as tmp:
        audit = AuditLog(AuditConfig(enabled=True, log_file=str(Path(tmp) / "a.jsonl")), "bench")
        client = Client(address="127.0.0.1:5000", user_agent="bench")
        params = {"name": "echo", "arguments": args}
        timed(
            "audit record",
            lambda: audit.record(
                method="tools/call",
                params=params,
                outcome="success",
                duration=0.001,
                claims=claims,
                client=client,
                backend="bare",
                request_id=7,
                trace_id=None,
            ),
        )
        audit.close()
    return out


def _bench_vmcp() -> Any:
    """bench/vmcp.py as a module: its process, session and wrk helpers (as bench/vmcp_tracing.py does)."""
    spec = importlib.util.spec_from_file_location("bench_vmcp", HERE / "vmcp.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VMCP = _bench_vmcp()
free_port, run, session_id = VMCP.free_port, VMCP.run, VMCP.session_id


def check_call(url: str, sid: str, tool: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {"text": "hi"}},
    }
    headers = {**HDR, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    text = httpx.post(url, json=body, headers=headers).text
    if '"error"' in text or "hi" not in text:
        raise RuntimeError(f"the call through {url} did not succeed: {text[:300]}")


def wrk(url: str, tool: str, sid: str, duration: int) -> dict[str, float]:
    result: dict[str, float] = VMCP.wrk(url, tool, sid, 1, duration)
    if result["non2xx"] or result["socket_errors"]:
        raise RuntimeError(f"errors from {url}: {result}")
    return result


def end_to_end(duration: int, rounds: int) -> dict[str, dict[str, list[dict[str, float]]]]:
    """{component: {variant: [wrk result per round]}}"""
    results: dict[str, dict[str, list[dict[str, float]]]] = {"vMCP gateway": {}, "proxy --remote": {}}
    bare = free_port()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        folder = Path(tmp)
        stack.enter_context(run([PY, str(BACKENDS), "bare", str(bare)], bare))
        backend = f"http://127.0.0.1:{bare}/mcp"
        targets: list[tuple[str, str, str, str]] = []  # component, variant, url, tool
        for variant in VARIANTS:
            authz = "authz" in variant
            audit = "audit" in variant
            config: dict[str, object] = {
                "name": f"bench-{variant}",
                "backends": [{"name": "bare", "url": backend}],
            }
            if authz:
                config["authz"] = document(scoped_policies("bare_echo"))
            if audit:
                config["audit"] = {"enabled": True, "logFile": str(folder / f"vmcp-{variant}.jsonl")}
            cfg = folder / f"vmcp-{variant}.json"
            cfg.write_text(json.dumps(config))
            port = free_port()
            stack.enter_context(
                run(
                    [
                        PY,
                        "-m",
                        "mcpfleet.cli.main",
                        "vmcp",
                        "serve",
                        "--config",
                        str(cfg),
                        "--port",
                        str(port),
                    ],
                    port,
                )
            )
            targets.append(("vMCP gateway", variant, f"http://127.0.0.1:{port}/mcp", "bare_echo"))
            args: list[str] = []
            if authz:
                (folder / f"authz-{variant}.json").write_text(json.dumps(document(scoped_policies("echo"))))
                args += ["--authz-config", str(folder / f"authz-{variant}.json")]
            if audit:
                (folder / f"audit-{variant}.json").write_text(
                    json.dumps({"enabled": True, "logFile": str(folder / f"proxy-{variant}.jsonl")})
                )
                args += ["--audit-config", str(folder / f"audit-{variant}.json")]
            port = free_port()
            stack.enter_context(
                run(
                    [PY, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port), *args, "--remote", backend],
                    port,
                )
            )
            targets.append(("proxy --remote", variant, f"http://127.0.0.1:{port}/mcp", "echo"))
        time.sleep(2.0)
        sessions = {}
        for _component, _variant, url, tool in targets:
            sessions[url] = session_id(url)
            check_call(url, sessions[url], tool)
            wrk(url, tool, sessions[url], 1)  # warm-up
        for r in range(rounds):
            for component, variant, url, tool in targets:
                result = wrk(url, tool, sessions[url], duration)
                results[component].setdefault(variant, []).append(result)
                print(
                    f"round {r + 1} {component:15} {variant:12} p50={result['p50']:.3f} ms p99={result['p99']:.3f} ms",
                    flush=True,
                )
    return results


def render(
    micro_us: dict[str, float], e2e: dict[str, dict[str, list[dict[str, float]]]], command: str
) -> str:
    load = os.getloadavg()
    lines = [
        "# Benchmark: authorization and audit",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} ({os.cpu_count()} cores), "
        f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end (other suites shared the cores; "
        f"at the start: {LOAD_AT_START[0]:.1f} / {LOAD_AT_START[1]:.1f} / {LOAD_AT_START[2]:.1f}).",
        f"Command: `{command}`",
        "",
        "## One decision, in process (CPU µs per operation, median of 5 batches)",
        "",
        "| operation | µs |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:.1f} |" for k, v in micro_us.items()]
    lines += [
        "",
        '`scoped`: policies each naming its tool in the scope (`resource == Tool::"…"`); only the',
        "policies whose scope can match are evaluated. `unscoped`: 100 policies whose scope matches every",
        "request (`permit(principal, action, resource) when { resource.name == … }`): all 100 conditions run.",
        "`plain cedarpy`: one `cedarpy.is_authorized` with pre-parsed handles of the whole policy set and the",
        "untrimmed entities (the reference). `previous`: the scope index alone (the path before the attribute",
        "trimming and the decision cache). `now`: index + trimmed attributes + decision cache; `repeated` is a",
        "cache hit, `distinct arguments` a cache miss (same caller: entities cached), `distinct callers` misses",
        "both caches. The token has 4 claims (sub, iss, roles, email); the policies read `roles` and `text`.",
        "",
        "## Added p50 per tools/call, 1 client, bare backend (ms; median over rounds)",
        "",
        "| component | variant | p50 | p99 | added p50 vs baseline |",
        "|---|---|---|---|---|",
    ]
    if not e2e:
        lines.append("| (not measured: `--micro-only`) | | | | |")
    for component, variants in e2e.items():
        base = statistics.median(r["p50"] for r in variants["baseline"])
        for variant in VARIANTS:
            runs = variants[variant]
            p50 = statistics.median(r["p50"] for r in runs)
            p99 = statistics.median(r["p99"] for r in runs)
            added = "—" if variant == "baseline" else f"{(p50 - base) * 1000:+.0f} µs"
            lines.append(f"| {component} | {variant} | {p50:.3f} | {p99:.3f} | {added} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=3, help="seconds per wrk run")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds over the variants")
    ap.add_argument("--write", type=Path, help="also write the markdown report to this file")
    ap.add_argument(
        "--micro-only", action="store_true", help="only the in-process costs (no servers, no wrk)"
    )
    args = ap.parse_args()
    if shutil.which("wrk") is None and not args.micro_only:
        raise SystemExit("wrk is required (apt-get install -y wrk)")
    global LOAD_AT_START
    LOAD_AT_START = os.getloadavg()
    micro_us = micro()
    for k, v in micro_us.items():
        print(f"{k:24} {v:8.1f} µs", flush=True)
    e2e = {} if args.micro_only else end_to_end(args.duration, args.rounds)
    command = "python -P bench/policy.py " + " ".join(sys.argv[1:])
    report = render(micro_us, e2e, command.strip())
    print(report)
    if args.write:
        args.write.write_text(report)


if __name__ == "__main__":
    main()
