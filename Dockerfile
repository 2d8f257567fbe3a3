# dtq images: `docker build --target manager` (the operator),
# `docker build --target api` (the HTTP API) and `docker build --target worker`
# (the reference worker with the demo handlers). All build the same packages,
# with the same flags, as `make images` (which needs no Docker:
# docs/install.md): static binaries (CGO off) on distroless, running as the
# non-root user 65532.
# Override BASE_IMAGE to build from another registry, e.g. docker.io/library/golang:1.26
ARG BASE_IMAGE=golang:1.26
# The version (pkg/version/VERSION) and the commit, for the OCI labels and
# --version; make docker-build passes both (the build context has no .git).
ARG VERSION=unknown
ARG COMMIT=unknown

FROM ${BASE_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
ARG COMMIT
WORKDIR /workspace
# Modules first, so source changes keep the download layer cached: the
# operator's and the SDK's (pkg, pkg/kubeauth), which it requires by path.
COPY go.mod go.sum ./
COPY pkg/go.mod pkg/go.sum ./pkg/
COPY pkg/kubeauth/go.mod pkg/kubeauth/go.sum ./pkg/kubeauth/
RUN go mod download
# The Go sources (.dockerignore keeps only *.go, not tests).
COPY . .
# GOARCH follows the platform being built (docker buildx --platform), else the host's.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X github.com/dtq-dev/dtq/pkg/version.commit=${COMMIT}" \
    -o /out/ ./cmd/manager ./cmd/worker ./cmd/api

FROM gcr.io/distroless/static:nonroot AS worker
ARG VERSION
ARG COMMIT
LABEL org.opencontainers.image.title=dtq-worker org.opencontainers.image.source=https://github.com/dtq-dev/dtq \
      org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${COMMIT}
WORKDIR /
COPY --from=builder /out/worker /worker
USER 65532:65532
# /metrics and /healthz (DTQ_METRICS_ADDR).
EXPOSE 8080
ENTRYPOINT ["/worker"]

FROM gcr.io/distroless/static:nonroot AS api
ARG VERSION
ARG COMMIT
LABEL org.opencontainers.image.title=dtq-api org.opencontainers.image.source=https://github.com/dtq-dev/dtq \
      org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${COMMIT}
WORKDIR /
COPY --from=builder /out/api /api
USER 65532:65532
# The API (HTTPS with --tls-cert-file, else HTTP).
EXPOSE 8443
ENTRYPOINT ["/api"]

# The manager is the last stage, so a plain `docker build .` builds it.
FROM gcr.io/distroless/static:nonroot AS manager
ARG VERSION
ARG COMMIT
LABEL org.opencontainers.image.title=dtq-manager org.opencontainers.image.source=https://github.com/dtq-dev/dtq \
      org.opencontainers.image.version=${VERSION} org.opencontainers.image.revision=${COMMIT}
WORKDIR /
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
