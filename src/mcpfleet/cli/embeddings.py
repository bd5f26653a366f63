"""`mcpfleet embeddings serve`: an embedding model shipped in a PyPI package, over TEI's and OpenAI's APIs."""

from __future__ import annotations

import sys

from mcpfleet.cli.options import Opt

HELP = "The embedding server (a bundled model, TEI and OpenAI APIs) for the gateway's find_tool."


def serve(
    host: str = Opt("127.0.0.1", "--host", help="Address to bind."),
    port: int = Opt(8080, "--port", help="Port to bind."),
    model: str = Opt("dleemiller/word-llama-l2-supercat", "--model", help="Bundled model to serve."),
    log_level: str = Opt("warning", "--log-level", help="debug, info, warning or error."),
) -> None:
    """Serve a bundled embedding model: POST /embed, GET /info, GET /health (TEI) and
    POST /v1/embeddings (OpenAI). Nothing is downloaded: the model's files are in an installed package.

    Examples:

    \b
      mcpfleet embeddings serve --port 8089
      mcpfleet embeddings serve --host 0.0.0.0 --port 8080 --model wordllama
    """
    import logging

    from mcpfleet import uvicornserver
    from mcpfleet.httplimits import BodyLimits, HttpLimits, uvicorn_options
    from mcpfleet.vmcp import embedmodel, embedserver

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        embedder = embedmodel.load(model)
    except embedmodel.UnknownModel as exc:
        print(f"--model: {exc}", file=sys.stderr)
        sys.exit(2)
    limits = HttpLimits(max_body_bytes=embedserver.MAX_BODY_BYTES)
    app = BodyLimits(embedserver.create_app(embedder), limits, refusal=embedserver.refusal)
    server = uvicornserver.server(
        app, host=host, port=port, log_level=log_level.lower(), **uvicorn_options(limits)
    )
    uvicornserver.run(server)
