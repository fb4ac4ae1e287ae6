# mcp-bearer-proxy: multi-stage, production dependencies only, runs as the unprivileged `node` user.
# Node 22 runs the TypeScript sources as they are (type stripping), so there is no build step to drift
# from what the tests run, and no loader in the image. test/e2e/process.test.ts runs this file's CMD as
# a plain process. The default target is the sidecar; `--target example-upstream` builds the reference
# MCP server of examples/upstream (docker-compose.yml), whose packages the sidecar image does not hold.

# Production dependencies with the optional ones: the OpenTelemetry SDK (17 of the image's 31 MiB of
# node_modules) stays in, so tracing is one variable away (OTEL_EXPORTER_OTLP_ENDPOINT, docs/tracing.md).
# An image without tracing: add `--omit=optional` below (14 MiB); the sidecar then refuses to start
# when an OTLP endpoint is set, naming the packages to install.
FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# The example upstream needs the MCP SDK (2.x server and Node adapter) and zod: development packages of
# the sidecar.
FROM node:22-bookworm-slim AS example-upstream
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund && npm cache clean --force
COPY --chown=root:root examples/upstream ./examples/upstream
# The upstream's caller-assertion check (UPSTREAM_ASSERTION_*) imports the Node verifier.
COPY --chown=root:root examples/assertion/node ./examples/assertion/node
USER node
EXPOSE 3000
CMD ["node", "examples/upstream/main.ts"]

FROM node:22-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    ADMIN_HOST=127.0.0.1 \
    ADMIN_PORT=8081
WORKDIR /app
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --chown=root:root package.json config.yaml ./
COPY --chown=root:root src ./src
COPY --chown=root:root bin ./bin
# The admin CLI on PATH: `docker exec <container> mcp-bearer-proxy admin list-clients`.
RUN chmod 0755 bin/mcp-bearer-proxy.js && ln -s /app/bin/mcp-bearer-proxy.js /usr/local/bin/mcp-bearer-proxy
USER node
EXPOSE 8080 8081
# The admin listener stays on loopback inside the container; the probe runs inside it too.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.ADMIN_PORT||8081)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node directly (not npm): SIGTERM reaches the sidecar, which drains and exits 0.
CMD ["node", "bin/mcp-bearer-proxy.js"]
