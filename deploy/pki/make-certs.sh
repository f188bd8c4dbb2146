#!/bin/sh
# make-certs.sh DIR NAME SAN[,SAN...] [DAYS]
#
# Makes the certificates that secure the ForCES TML (and, if wanted, a TCP
# gRPC API) with mutual TLS: a private CA in DIR/ca.crt and DIR/ca.key
# (made on the first call, reused after), and for NAME a key DIR/NAME.key
# and a certificate DIR/NAME.crt signed by the CA, for TLS server and
# client use, valid for the subject alternative names SAN (DNS:name or
# IP:address) and DAYS days (365 by default). ECDSA P-256; the CE and FE
# speak TLS 1.3 only. Examples:
#
#   make-certs.sh /etc/splitplane ce DNS:ce.splitplane,IP:127.0.0.1
#   make-certs.sh /etc/splitplane fe DNS:fe-1.fe.splitplane
#
# The CE's certificate must carry the name the FEs dial (the host of their
# ce_address, or their tls_server_name). An FE's certificate must name its
# FE ID (the FE's id) as a DNS name fe-ID or fe-ID.DOMAIN: the CE admits
# FE 1 only with a certificate naming fe-1 (docs/security.md). Keep
# DIR/ca.key off the routers once the certificates exist.
set -eu

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
	echo "usage: $0 DIR NAME SAN[,SAN...] [DAYS]" >&2
	exit 2
fi
dir=$1 name=$2 san=$3 days=${4:-365}
case $name in
*/* | "" | ca)
	echo "$0: NAME $name: want a plain file name other than ca" >&2
	exit 2
	;;
esac
mkdir -p "$dir"
umask 077

if [ ! -f "$dir/ca.crt" ]; then
	openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
		-keyout "$dir/ca.key" -out "$dir/ca.crt" -days "$((days * 3))" -subj "/CN=splitplane CA" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
	chmod 0644 "$dir/ca.crt"
fi

openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
	-keyout "$dir/$name.key" -out "$dir/$name.csr" -subj "/CN=$name" 2>/dev/null
ext=$(mktemp)
trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
	"extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=$san" >"$ext"
openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
	-out "$dir/$name.crt" -days "$days" -extfile "$ext" 2>/dev/null
chmod 0644 "$dir/$name.crt"
echo "$dir/$name.crt $dir/$name.key (CA $dir/ca.crt)"
