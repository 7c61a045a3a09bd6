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
# Needs BuildKit (the cache mounts below): Docker Engine 23.0 or later builds with it by default;
# 20.10-22.x need DOCKER_BUILDKIT=1. No `# syntax=` line: the Dockerfile frontend built into
# the engine is used, so a build contacts a registry only for the two base images.
#
# The image runs with NODE_ENV=production and binds 0.0.0.0, so the gateway needs
# authentication (AUTH_API_KEYS and/or AUTH_JWT_*) and REQUEST_STATE_KEYS (the same on every
# replica), or it exits 1 at start naming what to set. See .env.example and docs/deploying.md.
#
# Size: the runtime stage is Debian slim with the `node` binary alone (no npm, corepack or
# yarn), tini, the compiled JavaScript of the gateway, the worker and the packages they use,
# and their production dependencies only (no TypeScript, no tsx, no type declarations, no
# source maps). docs/deploying.md has the measured layer sizes.

ARG NODE_VERSION=22
# The Debian release of the node image, and of the runtime stage (the node binary needs its glibc).
ARG DEBIAN_RELEASE=bookworm

FROM node:${NODE_VERSION}-${DEBIAN_RELEASE}-slim AS base
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
# Then each workspace keeps what runs: package.json, dist/ (JavaScript) and any other files
# (packages/task-store/lua); not its sources, tsconfig, declarations or source maps. The
# terminal client (apps/cli, packages/client) is not part of the service.
FROM base AS build
COPY --from=manifests /app ./
RUN --mount=type=cache,target=/root/.npm npm ci
COPY tsconfig*.json ./
COPY apps ./apps
COPY packages ./packages
RUN npm run build \
 && rm -rf apps/cli packages/client apps/*/src packages/*/src apps/*/tsconfig*.json packages/*/tsconfig*.json \
           apps/*/node_modules packages/*/node_modules \
 && find apps packages -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.tsbuildinfo' \) -delete

# --- prod-deps: the production dependencies of the gateway and the worker ------------------
# Only those two workspaces (not the CLI's), without dev and optional dependencies. TypeScript
# would otherwise stay: it is an optional peer of valibot (@bull-board/api), which npm marks
# "devOptional", kept by --omit=dev alone. Optional native add-ons (msgpackr-extract) have
# JavaScript fallbacks. Then files nothing loads at run time: type declarations, source maps,
# markdown (licence files stay).
FROM base AS prod-deps
COPY --from=manifests /app ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --omit=optional --workspace=@mcp-tasks/gateway --workspace=@mcp-tasks/worker \
 && find . -path '*/node_modules/*' -type f \
      \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' -o -name '*.md' \) \
      ! -iname 'licen[cs]e*' ! -iname 'notice*' -delete \
 && rm -rf apps/cli packages/client \
 && ! test -e node_modules/typescript && ! test -e node_modules/tsx

# --- runtime -----------------------------------------------------------------------------------
FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# tini as PID 1: forwards SIGTERM to node and reaps zombies. `node` (uid 1000), as in the node
# images, runs the process (the Kubernetes manifests set runAsUser 1000).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 node \
 && useradd --uid 1000 --gid node --no-create-home --shell /usr/sbin/nologin node
COPY --from=base /usr/local/bin/node /usr/local/bin/node
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
WORKDIR /app
# The production node_modules (root and any nested ones, with the workspace links) and the
# manifests, then the compiled workspaces. Files stay owned by root and read-only for the
# `node` user that runs the process.
COPY --from=prod-deps /app ./
COPY --from=build /app/apps ./apps
COPY --from=build /app/packages ./packages
# Both entry points load their whole module graph (ES imports) before answering --version: a
# module missing from the pruned tree fails the build here, not at start in production.
RUN node apps/gateway/dist/main.js --version && node apps/worker/dist/main.js --version
USER node
EXPOSE 3000 9464
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "apps/gateway/dist/main.js"]
