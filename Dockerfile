# The single mcpfleet image: operator, runner (`mcpfleet proxy`), vMCP gateway and registry server.
# The runner starts `uvx://` packages with uv and `npx://` packages with Node's npx, so both are here.
FROM python:3.12-slim AS build
COPY --from=ghcr.io/astral-sh/uv:0.5 /uv /usr/local/bin/uv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN uv venv /opt/mcpfleet && uv pip install --python /opt/mcpfleet/bin/python --no-cache .

FROM python:3.12-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm git ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=ghcr.io/astral-sh/uv:0.5 /uv /uvx /usr/local/bin/
COPY --from=build /opt/mcpfleet /opt/mcpfleet
# uv and npm caches live in the home directory of the unprivileged user (an emptyDir when the
# root filesystem is read-only).
RUN useradd --uid 10001 --create-home --home-dir /home/mcpfleet mcpfleet
ENV PATH=/opt/mcpfleet/bin:$PATH \
    HOME=/home/mcpfleet \
    UV_CACHE_DIR=/home/mcpfleet/.cache/uv \
    PYTHONUNBUFFERED=1
USER 10001
EXPOSE 8080
ENTRYPOINT ["mcpfleet"]
CMD ["--help"]
