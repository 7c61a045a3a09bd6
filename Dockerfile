# syntax=docker/dockerfile:1
#
# One image for both processes:
#   gateway (default): node apps/gateway/dist/main.js      listens on $PORT (3000)
#   worker:            node apps/worker/dist/main.js       9464 (WORKER_HTTP_PORT: /healthz, /readyz, /metrics)
# In docker compose, override `command`; in Kubernetes, override `args` (not `command`,
# which would replace the tini entrypoint).
#
#   docker build -t mcp-task-service .
#   docker run --rm -p 3000:3000 -e REDIS_URL=redis://host:6379 -e AUTH_API_KEYS=alice:... -e REQUEST_STATE_KEYS=k1:... mcp-task-service
#   docker run --rm -e REDIS_URL=... mcp-task-service node apps/worker/dist/main.js
#
# The image runs with NODE_ENV=production and binds 0.0.0.0, so the gateway needs
# authentication (AUTH_API_KEYS and/or AUTH_JWT_*) and REQUEST_STATE_KEYS (the same on every
# replica), or it exits 1 at start naming what to set. See .env.example and the README.

ARG NODE_VERSION=22

FROM node:${NODE_VERSION}-bookworm-slim AS base
WORKDIR /app
ENV NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

# --- manifests: the lockfile and every workspace's package.json, nothing else ----------------
# `npm ci` below depends only on this stage's output, so its layers stay cached while only
# source files change. New workspaces under apps/ or packages/ are picked up automatically.
FROM base AS manifests
COPY package.json package-lock.json ./
COPY apps ./apps
COPY packages ./packages
RUN find apps packages -mindepth 2 -maxdepth 2 ! -name package.json -exec rm -rf {} +

# --- build: all dependencies (TypeScript is a dev dependency), then `tsc -b` ----------------
FROM base AS build
COPY --from=manifests /app ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY tsconfig*.json ./
COPY apps ./apps
COPY packages ./packages
RUN npm run build \
 && find apps packages -name '*.tsbuildinfo' -delete \
 && rm -rf apps/*/node_modules packages/*/node_modules

# --- prod-deps: production dependencies only (the equivalent of `npm prune --omit=dev`) -----
FROM base AS prod-deps
COPY --from=manifests /app ./
RUN --mount=type=cache,target=/root/.npm npm ci --omit=dev

# --- runtime ---------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# tini as PID 1: forwards SIGTERM to node and reaps zombies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
# Compiled workspaces (dist/, package.json; src/ is kept for source maps), then the production
# node_modules (root and any nested ones, with the workspace links). Files stay owned by root
# and read-only for the `node` user that runs the process.
COPY --from=build /app/apps ./apps
COPY --from=build /app/packages ./packages
COPY --from=prod-deps /app ./
USER node
EXPOSE 3000 9464
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "apps/gateway/dist/main.js"]
