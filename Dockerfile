# The single mcpfleet image: operator, runner (`mcpfleet proxy`), vMCP gateway and registry server.
# Same layout, entrypoint and user as `make image` (src/mcpfleet/devcluster/image.py), which builds it
# with no Docker engine and no registry: Debian bookworm + python3, the project's wheel in a venv at
# /opt/mcpfleet (uv/uvx come with it), Node 22 + npm in /usr/local, user 10001 with HOME
# /home/mcpfleet, and uv's and npm's caches warmed with the example/test servers so `uvx://` and
# `npx://` servers start offline (UV_OFFLINE=1, NPM_CONFIG_OFFLINE=true).
# The venv is compiled to bytecode at install: it is read-only to user 10001, so a start would
# otherwise compile every module it imports, every time (about 1 s of CPU per service start).
# Build and push to your registry: docker build -t REGISTRY/mcpfleet:TAG . && docker push REGISTRY/mcpfleet:TAG
FROM debian:bookworm-slim AS base
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates libstdc++6 git \
    && rm -rf /var/lib/apt/lists/*

FROM base AS build
COPY --from=ghcr.io/astral-sh/uv:0.9 /uv /usr/local/bin/uv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN uv build --wheel --out-dir /dist . \
    && uv venv --python /usr/bin/python3 /opt/mcpfleet \
    && uv pip install --no-cache --compile-bytecode --python /opt/mcpfleet/bin/python /dist/*.whl

FROM base
COPY --from=node:22-bookworm-slim /usr/local/bin/node /usr/local/bin/node
COPY --from=node:22-bookworm-slim /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && useradd --uid 10001 --user-group --create-home --home-dir /home/mcpfleet --shell /bin/sh mcpfleet
COPY --from=build /opt/mcpfleet /opt/mcpfleet
ENV PATH=/opt/mcpfleet/bin:/usr/local/bin:/usr/bin:/bin \
    HOME=/home/mcpfleet \
    UV_CACHE_DIR=/home/mcpfleet/.cache/uv \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    PYTHONUNBUFFERED=1
USER 10001
WORKDIR /home/mcpfleet
# Warm the caches with the servers of examples/ (image.py's WARM_UVX / WARM_NPX), then go offline.
RUN uvx mcp-server-time --help >/dev/null \
    && (timeout 120 npx -y @modelcontextprotocol/server-everything </dev/null >/dev/null 2>&1 || true) \
    && ls /home/mcpfleet/.npm/_npx/*/node_modules/@modelcontextprotocol/server-everything/package.json >/dev/null
ENV UV_OFFLINE=1 \
    NPM_CONFIG_OFFLINE=true
EXPOSE 8080
ENTRYPOINT ["mcpfleet"]
CMD ["--help"]
