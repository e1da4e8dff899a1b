# mcp-memoryrouter: the MCP endpoint (/mcp) and the REST vault (/v1) in one process.
#   docker build -t mcp-memoryrouter .
#   docker run -p 8787:8787 -v memoryrouter-data:/data \
#     -e MEMORYROUTER_ALLOWED_HOSTS='["memory.example.com"]' mcp-memoryrouter
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MEMORYROUTER_DATA_DIR=/data \
    MEMORYROUTER_HOST=0.0.0.0 \
    MEMORYROUTER_PORT=8787

RUN useradd --create-home --uid 10001 memoryrouter \
    && mkdir -p /data && chown memoryrouter:memoryrouter /data

WORKDIR /app
COPY pyproject.toml README.md scopes.yaml ./
COPY mcp_memoryrouter ./mcp_memoryrouter
RUN pip install --no-cache-dir . && rm -rf /app/mcp_memoryrouter

USER memoryrouter
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ['MEMORYROUTER_PORT'], timeout=4)"]
CMD ["mcp-memoryrouter", "serve"]
