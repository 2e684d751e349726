#!/usr/bin/env bash
# Builds the container image (Dockerfile at the repository root) with buildah,
# then smoke-tests it: ellm --version as the image's user, and `ellm serve` on
# the built-in model answering /health 503 while loading, then 200.
#
#   deploy/image.sh [TAG]            (default localhost/ellm:dev)
#
# Where no container registry is reachable (this project's CI), the builder
# stage's base image cannot be pulled: with ELLM_LOCAL_BUILDER=1 the script
# assembles one from this machine's Go toolchain (busybox for the shell,
# CA certificates, `go env GOROOT`) and passes it as GO_IMAGE. Needs root or
# rootless buildah; `apt-get install buildah busybox-static` on Debian.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-localhost/ellm:dev}
B=(buildah --storage-driver "${STORAGE_DRIVER:-vfs}")
args=(--isolation chroot --build-arg "VERSION=$(git describe --always --dirty 2>/dev/null || echo dev)")

if [ "${ELLM_LOCAL_BUILDER:-0}" = 1 ]; then
	goroot=$(GOTOOLCHAIN=go1.27.3 go env GOROOT)
	builder=localhost/ellm-go-builder:go1.27.3
	ctr=$("${B[@]}" from scratch)
	mnt=$("${B[@]}" mount "$ctr")
	mkdir -p "$mnt/bin" "$mnt/usr/local" "$mnt/etc/ssl/certs" "$mnt/tmp" "$mnt/root"
	chmod 1777 "$mnt/tmp"
	cp "$(command -v busybox)" "$mnt/bin/busybox"
	for a in sh mkdir ls cat cp rm mv env; do ln -s busybox "$mnt/bin/$a"; done
	cp -a "$goroot" "$mnt/usr/local/go"
	chmod -R u+w "$mnt/usr/local/go"
	cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/"
	"${B[@]}" umount "$ctr"
	"${B[@]}" config --env PATH=/usr/local/go/bin:/bin --env HOME=/root --env GOPATH=/root/go "$ctr"
	"${B[@]}" commit -q "$ctr" "$builder"
	"${B[@]}" rm "$ctr" >/dev/null
	args+=(--pull-never --build-arg "GO_IMAGE=$builder")
fi
"${B[@]}" bud "${args[@]}" -t "$tag" .

ctr=$("${B[@]}" from --pull-never "$tag")
trap '"${B[@]}" rm "$ctr" >/dev/null' EXIT
"${B[@]}" run --isolation chroot --user 65532:65532 "$ctr" -- /usr/local/bin/ellm --version
port=${ELLM_SMOKE_PORT:-18123}
"${B[@]}" run --isolation chroot --user 65532:65532 --env HOME=/home/ellm "$ctr" -- \
	/usr/local/bin/ellm serve --host 127.0.0.1 --port "$port" --sequence-length 512 --batch-size 1 &
run=$!
seen503=0
for _ in $(seq 1 120); do
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true)
	[ "$code" = 503 ] && seen503=1
	[ "$code" = 200 ] && break
	sleep 0.5
done
kill -TERM "$run" 2>/dev/null || true
wait "$run" || true
echo "image $tag: /health 503 while loading seen: $seen503; final: $code"
[ "$code" = 200 ]
