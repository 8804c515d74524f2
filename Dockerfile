# Tessera's image: Debian (bookworm) with Node 20, running as the unprivileged `node` user.
# Stage 1 builds (npm ci runs `prepare`: the WebAssembly kernels, the native kernels with gcc and
# the TypeScript), then drops the dev dependencies; stage 2 holds only what runs: bin/, dist/,
# build/ (kernels.wasm, tessera-native.node), models/ and the production node_modules. No
# compiler, no dev dependency in the final image.
#   docker build -t tessera:0.1.0 .
#   docker run --rm -p 8000:8000 tessera:0.1.0 serve --host 0.0.0.0
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
COPY . .
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production TESSERA_HOME=/var/lib/tessera
WORKDIR /app
COPY --from=build --chown=root:root /app/package.json /app/package-lock.json ./
COPY --from=build --chown=root:root /app/bin ./bin
COPY --from=build --chown=root:root /app/dist ./dist
COPY --from=build --chown=root:root /app/build ./build
COPY --from=build --chown=root:root /app/models ./models
COPY --from=build --chown=root:root /app/node_modules ./node_modules
RUN mkdir -p /var/lib/tessera && chown node:node /var/lib/tessera
USER node
EXPOSE 8000 8100
ENTRYPOINT ["node", "/app/bin/tessera.js"]
CMD ["serve", "--host", "0.0.0.0"]
