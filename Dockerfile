# dtq images: `docker build --target manager` (the operator),
# `docker build --target api` (the HTTP API) and `docker build --target worker`
# (the reference worker with the demo handlers). All build the same packages,
# with the same flags, as `make images` (which needs no Docker:
# docs/install.md): static binaries (CGO off) on distroless, running as the
# non-root user 65532.
# Override BASE_IMAGE to build from another registry, e.g. docker.io/library/golang:1.26
ARG BASE_IMAGE=golang:1.26

FROM ${BASE_IMAGE} AS builder
ARG TARGETOS
ARG TARGETARCH
WORKDIR /workspace
# Modules first, so source changes keep the download layer cached.
COPY go.mod go.sum ./
RUN go mod download
# The Go sources (.dockerignore keeps only *.go, not tests).
COPY . .
# GOARCH follows the platform being built (docker buildx --platform), else the host's.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/manager ./cmd/worker ./cmd/api

FROM gcr.io/distroless/static:nonroot AS worker
WORKDIR /
COPY --from=builder /out/worker /worker
USER 65532:65532
# /metrics and /healthz (DTQ_METRICS_ADDR).
EXPOSE 8080
ENTRYPOINT ["/worker"]

FROM gcr.io/distroless/static:nonroot AS api
WORKDIR /
COPY --from=builder /out/api /api
USER 65532:65532
# The API (HTTPS with --tls-cert-file, else HTTP).
EXPOSE 8443
ENTRYPOINT ["/api"]

# The manager is the last stage, so a plain `docker build .` builds it.
FROM gcr.io/distroless/static:nonroot AS manager
WORKDIR /
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
