"""The CRD conversion webhook: the API server asks it to turn objects from one served version into another.

Every kind whose versions differ (`Resource.version_changes`) names this webhook in its CRD's
`spec.conversion`; the answer is `mcpfleet.api.versions.convert`, the same function `mcpfleet up`
uses, so both platforms convert alike. It is served over TLS (the API server refuses anything else):

- by the operator (`mcpfleet operator` serves it beside its reconcile loops, on every replica, behind
  the `mcpfleet-conversion` Service), which also injects the CA bundle into the CRDs;
- on the dev cluster by a control-plane process (`python -m mcpfleet.api.conversion`), so objects
  of any version are readable before and without an operator.

Hostile input: a review is bounded (body size, object count) and every failure is a ConversionReview
with `result.status: Failure` and a message naming the field, never a 500.

Counted: `GET /metrics` reports the reviews answered and the objects converted (by kind and
direction), so a test or a benchmark can tell whose requests still need the webhook. The operator
itself speaks the storage version and needs none (docs/versions.md).

Kept-alive connections stay open longer than the API server's own idle timeout (Go's HTTP
transport closes idle connections after 90 s): a server closing first races the API server's next
POST on that connection, which Go does not retry, and the API server answers its client 500
(`conversion webhook ... failed: ... EOF`).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mcpfleet.api.kinds import KIND_BY_NAME
from mcpfleet.api.meta import GROUP
from mcpfleet.api.versions import ConversionError, convert

if TYPE_CHECKING:
    import uvicorn

CONVERT_PATH = "/convert"
SERVICE_NAME = "mcpfleet-conversion"
SERVICE_NAMESPACE = "mcpfleet-system"
SERVICE_PORT = 443
CONTAINER_PORT = 9443
MAX_BODY = 8 * 1024 * 1024
"""The API server sends at most a list page of objects (each under etcd's 1.5 MiB limit); 8 MiB is ample."""
MAX_OBJECTS = 1000
KEEP_ALIVE_SECONDS = 120
"""Longer than the API server's idle-connection timeout (90 s): the API server always closes first."""


@dataclass
class ConversionCounts:
    """What one webhook server answered: reviews by result, objects by (kind, from, to) version."""

    reviews: Counter[str] = field(default_factory=Counter)
    objects: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def prometheus(self) -> str:
        """The counters in Prometheus' text format."""
        lines = [
            "# HELP mcpfleet_conversion_reviews_total ConversionReviews answered, by result.",
            "# TYPE mcpfleet_conversion_reviews_total counter",
            *(
                f'mcpfleet_conversion_reviews_total{{result="{r}"}} {n}'
                for r, n in sorted(self.reviews.items())
            ),
            "# HELP mcpfleet_conversion_objects_total Objects converted, by kind and version.",
            "# TYPE mcpfleet_conversion_objects_total counter",
            *(
                f'mcpfleet_conversion_objects_total{{kind="{k}",from_version="{f}",to_version="{t}"}} {n}'
                for (k, f, t), n in sorted(self.objects.items())
            ),
        ]
        return "\n".join(lines) + "\n"


def convert_review(review: Any, counts: ConversionCounts | None = None) -> dict[str, Any]:
    """The ConversionReview answering `review` (apiextensions.k8s.io/v1), counted in `counts`."""
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid", "") if isinstance(request, dict) else ""
    try:
        if not isinstance(request, dict):
            raise ConversionError("request", "missing")
        desired = str(request.get("desiredAPIVersion", ""))
        if not desired.startswith(f"{GROUP}/"):
            raise ConversionError("request.desiredAPIVersion", f"not a {GROUP} version: {desired!r}")
        objects = request.get("objects")
        if not isinstance(objects, list) or len(objects) > MAX_OBJECTS:
            raise ConversionError("request.objects", f"must be a list of at most {MAX_OBJECTS} objects")
        converted = [_convert_one(obj, desired.removeprefix(f"{GROUP}/"), i) for i, obj in enumerate(objects)]
        if counts is not None:
            for before, after in zip(objects, converted, strict=True):
                counts.objects[(after["kind"], before["apiVersion"], after["apiVersion"])] += 1
        response: dict[str, Any] = {
            "uid": uid,
            "convertedObjects": converted,
            "result": {"status": "Success"},
        }
    except ConversionError as exc:
        response = {"uid": uid, "convertedObjects": [], "result": {"status": "Failure", "message": str(exc)}}
    if counts is not None:
        counts.reviews[response["result"]["status"]] += 1
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _convert_one(obj: Any, version: str, index: int) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConversionError(f"request.objects[{index}]", "must be an object")
    kind = KIND_BY_NAME.get(str(obj.get("kind", "")))
    if kind is None:
        raise ConversionError(f"request.objects[{index}].kind", f"unknown kind {obj.get('kind')!r}")
    return convert(obj, kind.version_changes, version)


async def _healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


def app(counts: ConversionCounts | None = None) -> Starlette:
    """The webhook as an ASGI app: POST /convert, GET /healthz, GET /metrics (`counts`)."""
    counts = counts if counts is not None else ConversionCounts()

    async def convert_endpoint(request: Request) -> Response:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return PlainTextResponse(f"request body over {MAX_BODY} bytes", status_code=413)
        try:
            review = json.loads(body)
        except ValueError:
            return PlainTextResponse("request body is not JSON", status_code=400)
        return JSONResponse(convert_review(review, counts))

    async def metrics(_: Request) -> Response:
        return PlainTextResponse(counts.prometheus(), media_type="text/plain; version=0.0.4")

    return Starlette(
        routes=[
            Route(CONVERT_PATH, convert_endpoint, methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]
    )


def server_config(
    asgi: Starlette, host: str, port: int, cert: str, key: str, **uvicorn_options: Any
) -> uvicorn.Config:
    """The uvicorn settings of every webhook server (dev control plane, operator): TLS, quiet logs,
    and kept-alive connections that outlive the API server's idle timeout (see the module doc)."""
    import uvicorn  # only where a server runs: crdgen and the dev tooling import the constants

    return uvicorn.Config(
        asgi,
        host=host,
        port=port,
        ssl_certfile=cert,
        ssl_keyfile=key,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        **uvicorn_options,
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the webhook over TLS: `python -m mcpfleet.api.conversion --cert C --key K --port P`."""
    parser = argparse.ArgumentParser(prog="python -m mcpfleet.api.conversion")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=CONTAINER_PORT)
    parser.add_argument("--cert", required=True, help="PEM serving certificate")
    parser.add_argument("--key", required=True, help="PEM private key")
    args = parser.parse_args(argv)
    import uvicorn

    uvicorn.Server(server_config(app(), args.host, args.port, args.cert, args.key)).run()


if __name__ == "__main__":
    main()
