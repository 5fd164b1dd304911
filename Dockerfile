# The gateway's image: the esbuild bundle plus better-sqlite3, its one native module.
# Build stage: compiles better-sqlite3 from source for the image's architecture (amd64 or arm64)
# and bundles the gateway.
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json .npmrc ./
# The headers of the image's Node, so node-gyp downloads nothing; build better-sqlite3 from source
# rather than fetching a prebuilt binary.
ENV npm_config_nodedir=/usr/local npm_config_build_from_source=true
RUN npm ci --no-audit --no-fund
COPY build.mjs tsconfig.json ./
COPY src ./src
RUN npm run build \
 && mkdir -p /out/node_modules \
 && cp -r dist /out/dist \
 && cp -r node_modules/better-sqlite3 node_modules/bindings node_modules/file-uri-to-path /out/node_modules/ \
 && rm -rf /out/node_modules/better-sqlite3/deps /out/node_modules/better-sqlite3/src /out/node_modules/better-sqlite3/build/Release/obj*

# Run stage: Node and the bundle, as an unprivileged user that owns only the queue's directory.
FROM node:20-bookworm-slim
RUN groupadd --system harbor \
 && useradd --system --gid harbor --home-dir /var/lib/harbor-gateway --shell /usr/sbin/nologin harbor \
 && install -d -o harbor -g harbor -m 0750 /var/lib/harbor-gateway
WORKDIR /opt/harbor-gateway
COPY --from=build /out ./
# NODE_OPTIONS and GLIBC_TUNABLES: the V8 heap and malloc settings of scripts/lib/node-options.mjs.
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-semi-space-size=8 --max-old-space-size=96" \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 \
    DATA_DIR=/var/lib/harbor-gateway \
    HOST=0.0.0.0 \
    PORT=8000 \
    HTTPS_PORT=8443
USER harbor
VOLUME /var/lib/harbor-gateway
EXPOSE 8000 8443
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/gateway.mjs", "serve"]
