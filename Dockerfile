# mcp-memoryrouter: the MCP endpoint (/mcp), the REST vault (/v1) and the explorer (/ui) in one
# process, as uid 10001, with its data in the /data volume (docs/deploy.md, "The container image").
#   docker build -t memoryrouter .
# One server, reached at its public HTTPS URL through a reverse proxy that ends TLS:
#   docker run -d -p 8787:8787 --read-only --memory 512m -v memoryrouter-data:/data \
#     -e MEMORYROUTER_PUBLIC_URL=https://memory.example.com memoryrouter
# Replicas over PostgreSQL: the same command on each, with the same database and sealing key
# (a file uid 10001 may read):
#   docker run -d -p 8787:8787 --read-only --memory 512m -v memoryrouter-data:/data \
#     -v /etc/memoryrouter/sealing.key:/run/secrets/sealing.key:ro \
#     -e MEMORYROUTER_PUBLIC_URL=https://memory.example.com \
#     -e MEMORYROUTER_DATABASE_URL=postgresql://memoryrouter:…@db.internal:5432/memoryrouter \
#     -e MEMORYROUTER_SEALING_KEY_FILE=/run/secrets/sealing.key memoryrouter
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEMORYROUTER_DATA_DIR=/data \
    MEMORYROUTER_CACHE_DIR=/opt/mcp-memoryrouter/cache \
    MEMORYROUTER_HOST=0.0.0.0 \
    MEMORYROUTER_PORT=8787

RUN useradd --create-home --uid 10001 memoryrouter \
    && mkdir -p /data /opt/mcp-memoryrouter/cache \
    && chown memoryrouter:memoryrouter /data /opt/mcp-memoryrouter/cache

# The package with its PostgreSQL driver, every dependency at the version constraints.txt pins;
# built in a folder removed in the same layer, so nothing of pip's build stays in the image.
COPY constraints.txt pyproject.toml README.md scopes.yaml /tmp/build/
COPY mcp_memoryrouter /tmp/build/mcp_memoryrouter
RUN pip install --no-cache-dir --disable-pip-version-check \
        -c /tmp/build/constraints.txt '/tmp/build[postgres]' \
    && rm -rf /tmp/build

USER memoryrouter
# The local embedding model's integer form, built once here (~4 s, ~500 MiB at its peak) into
# MEMORYROUTER_CACHE_DIR instead of at each new container's first start: a container then
# starts under --memory 512m, and with --read-only (the /data volume its only writable path).
RUN python -c "from mcp_memoryrouter.config import Settings; \
from mcp_memoryrouter.vault.app import embedders_for; \
embedders_for(Settings()).get('local').prepare()" \
    && ls /opt/mcp-memoryrouter/cache/models/*.onnx

# Temporary files (SQLite's among them) go to the volume too, so that with --read-only and no
# tmpfs the volume is the only path the server writes (SQLite unlinks its own as it makes them).
ENV TMPDIR=/data
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['MEMORYROUTER_PORT'], timeout=4)"]
CMD ["mcp-memoryrouter", "serve"]
