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
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from mcpfleet.api.kinds import KIND_BY_NAME
from mcpfleet.api.meta import GROUP
from mcpfleet.api.versions import ConversionError, convert

CONVERT_PATH = "/convert"
SERVICE_NAME = "mcpfleet-conversion"
SERVICE_NAMESPACE = "mcpfleet-system"
SERVICE_PORT = 443
CONTAINER_PORT = 9443
MAX_BODY = 8 * 1024 * 1024
"""The API server sends at most a list page of objects (each under etcd's 1.5 MiB limit); 8 MiB is ample."""
MAX_OBJECTS = 1000


def convert_review(review: Any) -> dict[str, Any]:
    """The ConversionReview answering `review` (apiextensions.k8s.io/v1)."""
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
        response: dict[str, Any] = {
            "uid": uid,
            "convertedObjects": converted,
            "result": {"status": "Success"},
        }
    except ConversionError as exc:
        response = {"uid": uid, "convertedObjects": [], "result": {"status": "Failure", "message": str(exc)}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response}


def _convert_one(obj: Any, version: str, index: int) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConversionError(f"request.objects[{index}]", "must be an object")
    kind = KIND_BY_NAME.get(str(obj.get("kind", "")))
    if kind is None:
        raise ConversionError(f"request.objects[{index}].kind", f"unknown kind {obj.get('kind')!r}")
    return convert(obj, kind.version_changes, version)


async def _convert_endpoint(request: Request) -> Response:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return PlainTextResponse(f"request body over {MAX_BODY} bytes", status_code=413)
    try:
        review = json.loads(body)
    except ValueError:
        return PlainTextResponse("request body is not JSON", status_code=400)
    return JSONResponse(convert_review(review))


async def _healthz(_: Request) -> Response:
    return PlainTextResponse("ok")


def app() -> Starlette:
    """The webhook as an ASGI app: POST /convert, GET /healthz."""
    return Starlette(
        routes=[
            Route(CONVERT_PATH, _convert_endpoint, methods=["POST"]),
            Route("/healthz", _healthz, methods=["GET"]),
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """Serve the webhook over TLS: `python -m mcpfleet.api.conversion --cert C --key K --port P`."""
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m mcpfleet.api.conversion")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=CONTAINER_PORT)
    parser.add_argument("--cert", required=True, help="PEM serving certificate")
    parser.add_argument("--key", required=True, help="PEM private key")
    args = parser.parse_args(argv)
    uvicorn.run(
        app(),
        host=args.host,
        port=args.port,
        ssl_certfile=args.cert,
        ssl_keyfile=args.key,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
