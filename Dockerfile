# syntax=docker/dockerfile:1
# ellm container image: a static binary on an empty base, run as a non-root
# user, serving the model mounted at /models. See docs/deploy.md.
#
#   docker build -t ellm:dev .            (or: buildah bud -t ellm:dev .)
#   docker run -p 8000:8000 -v ~/models/Qwen3-8B:/models:ro ellm:dev --sequence-length 32768

# Any Go ≥ 1.21 builder works: GOTOOLCHAIN makes it fetch the toolchain
# go.mod requires (go1.27.3) from the module proxy, as the Makefile does.
ARG GO_IMAGE=docker.io/library/golang:1.24-bookworm
FROM ${GO_IMAGE} AS build
ENV GOTOOLCHAIN=go1.27.3 CGO_ENABLED=0 GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -ldflags "-s -w -X main.version=${VERSION}" -o /out/ellm ./cmd/ellm \
	&& mkdir -p /out/home/ellm/.cache /out/data/sessions /out/models /out/tmp

FROM scratch
COPY --from=build /out/ellm /usr/local/bin/ellm
# Writable home (the built-in synthetic model is generated into its cache),
# session store and /tmp, owned by the unprivileged user.
COPY --from=build --chown=65532:65532 /out/home /home
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build --chown=65532:65532 /out/tmp /tmp
COPY --from=build /out/models /models
USER 65532:65532
ENV HOME=/home/ellm ELLM_HOST=0.0.0.0 ELLM_PORT=8000
VOLUME ["/models", "/data"]
EXPOSE 8000
ENTRYPOINT ["ellm", "serve"]
CMD ["--model-path", "/models", "--session-store", "/data/sessions"]
