#!/bin/sh
# capture.sh: regenerate the golden SIOCETHTOOL request buffers in this
# directory from the real ethtool(8). Needs root, gcc, ethtool and iproute2.
# It runs ethtool inside a throw-away network namespace against a veth (which
# has no n-tuple support: the kernel answers EOPNOTSUPP, but the request
# bytes are recorded by ethtool-shim.so before the ioctl is made).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
ns=splitplane-capture-$$
trap 'ip netns del $ns 2>/dev/null || true; rm -rf "$tmp"' EXIT

gcc -shared -fPIC -O2 -Wall -o "$tmp/shim.so" "$here/ethtool-shim.c" -ldl
SHIM_LAYOUT="$here/layout.txt" LD_PRELOAD="$tmp/shim.so" /bin/true

ip netns add $ns
ip -n $ns link add cap0 type veth peer name cap1
ip -n $ns link set cap0 up

run() { # run NAME ethtool-args...: record into $here/NAME/
	name=$1; shift
	rm -rf "${here:?}/$name"; mkdir -p "$here/$name"
	{ echo "\$ ethtool $*"; SHIM_OUT="$here/$name" LD_PRELOAD="$tmp/shim.so" \
		ip netns exec $ns ethtool "$@" 2>&1 || echo "(exit status $?)"; } > "$here/$name/output.txt"
}

run ins-tcp4 -N cap0 flow-type tcp4 src-ip 192.0.2.1 dst-ip 198.51.100.2 src-port 179 dst-port 40000 action 0 loc 5
run ins-tcp6 -N cap0 flow-type tcp6 src-ip 2001:db8::1 dst-ip 2001:db8:0:1::2 src-port 179 dst-port 40001 action 2 loc 6
run del -N cap0 delete 5

# ethtool -n: the shim answers the read commands, with the rules at
# locations 5 and 6 taken from rule-5.bin and rule-6.bin, which are the
# SRXCLSRLINS buffers that splitplane's encoder produces for the same rules
# (written by `go test ./classifier -run TestEthtoolDecodesOurRules
# -update-ntuple`, which must have run before this script), so the
# output shows how the real ethtool decodes splitplane's bytes.
mkdir -p "$tmp/fake"
echo "5 6" > "$tmp/fake/locs"
cp "$here/ours/rule-5.bin" "$here/ours/rule-6.bin" "$tmp/fake/"
rm -rf "$here/list"; mkdir -p "$here/list"
{ echo "\$ ethtool -n cap0"; SHIM_OUT="$here/list" SHIM_FAKE="$tmp/fake" LD_PRELOAD="$tmp/shim.so" \
	ip netns exec $ns ethtool -n cap0 2>&1 || echo "(exit status $?)"; } > "$here/list/output.txt"
ethtool --version > "$here/ethtool-version.txt"
