# auth-gateway image: the gateway (default command) and, with another command, the example list service.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY examples ./examples
COPY bench ./bench
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# Only the configuration, never the demo users file: mount your users file at /app/config/users.htpasswd
# (docker-compose.yml mounts the one GATEWAY_USERS_FILE names).
COPY config/gateway.yaml ./config/gateway.yaml
USER node
# 8080: the public port; 9091: the admin listener (/metrics), on 127.0.0.1 unless ADMIN_HOST says otherwise.
EXPOSE 8080 9091
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/src/main.js", "serve", "--config", "/app/config/gateway.yaml"]
