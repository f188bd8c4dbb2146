#!/bin/sh
# make package: stages the package's files under build/package and builds
# build/splitplane_VERSION_amd64.deb with nfpm (go tool nfpm, pinned in go.mod).
set -eu
cd "$(dirname "$0")/../.."
GO=${GO:-go}
out=build/package
rm -rf "$out" && mkdir -p "$out/systemd" "$out/man"
version=${SPLITPLANE_VERSION:-$(git describe --tags --always --dirty 2>/dev/null | sed 's/^v//')}
case "$version" in [0-9]*) ;; *) version="0.0.0+git$version" ;; esac
export SPLITPLANE_VERSION="$version"
CGO_ENABLED=0 $GO build -trimpath -o "$out/splitplane" ./cmd/splitplane
CGO_ENABLED=0 $GO build -trimpath -o "$out/splitplane-lab" ./cmd/splitplane-lab
"$out/splitplane" man "$out/man"
gzip -9n "$out"/man/*.1
"$out/splitplane" completion bash > "$out/splitplane.bash"
# The units name /usr/local/bin (a binary installed by hand); the package's is in /usr/bin.
for u in splitplane-ce.service splitplane-fe.service; do
	sed 's#/usr/local/bin/splitplane#/usr/bin/splitplane#g' "deploy/systemd/$u" > "$out/systemd/$u"
done
printf 'splitplane\nSee the project repository for its license and authors.\n' > "$out/copyright"
mkdir -p build
$GO tool nfpm package --config deploy/package/nfpm.yaml --packager deb --target build/
ls build/*.deb
