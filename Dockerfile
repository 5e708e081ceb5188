# keygate in a container: one static binary (CGO off: the SQLite driver is
# pure Go) on a distroless base, running as a non-root user.
#
#   docker build -t keygate .
#   docker run --rm -p 8080:8080 keygate serve --dev --listen 0.0.0.0:8080   # try it: dev mode
#   docker run -p 8080:8080 -p 9091:9091 -v /etc/keygate:/etc/keygate:ro -v keygate-data:/var/lib/keygate keygate
#
# The default command serves /etc/keygate/keygate.yaml (see examples/) with
# its data in the /var/lib/keygate volume, traffic on 8080 and health checks
# on 9091 (probe_listen). The admin listener stays on the container's
# loopback unless the configuration gives it admin_tls with client
# certificates; keygate refuses a plain-HTTP admin listener off loopback.
# Secrets come from files mounted beside the configuration (root_key_file,
# admin_token_file, database_url_file, redis_url_file) or KEYGATE_*
# variables, never from the image. TestDockerfile checks this file's
# commands and flags against the binary's.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -tags grpcnotrace -ldflags="-s -w" -o /out/keygate ./cmd/keygate \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/keygate /usr/local/bin/keygate
COPY --from=build --chown=65532:65532 /out/data /var/lib/keygate
USER 65532:65532
WORKDIR /var/lib/keygate
VOLUME ["/var/lib/keygate"]
EXPOSE 8080 9091
ENTRYPOINT ["/usr/local/bin/keygate"]
CMD ["serve", "--config", "/etc/keygate/keygate.yaml", "--data-dir", "/var/lib/keygate", "--listen", "0.0.0.0:8080", "--probe-listen", "0.0.0.0:9091"]
