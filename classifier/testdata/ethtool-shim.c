// ethtool-shim.c: an LD_PRELOAD library that records the request buffer of
// every SIOCETHTOOL ioctl that ethtool(8) makes, and optionally answers the
// n-tuple read commands itself, so that `ethtool -n` runs its whole sequence
// on a NIC that has no n-tuple support (veth). See README.md.
//
// Build: gcc -shared -fPIC -O2 -o ethtool-shim.so ethtool-shim.c -ldl
//
// Environment:
//   SHIM_OUT=DIR       write DIR/NN-CMD.hex for each SIOCETHTOOL request
//                      (the bytes at ifr_data when ethtool calls ioctl)
//   SHIM_FAKE=DIR      answer GRXRINGS (4 rings), GRXCLSRLCNT, GRXCLSRLALL
//                      (locations from DIR/locs, table size 2048) and
//                      GRXCLSRULE (fs copied from DIR/rule-LOC.bin, a whole
//                      struct ethtool_rxnfc) without calling the kernel
//   SHIM_LAYOUT=FILE   write sizeof/offsetof of the structures, as compiled
//                      from this system's <linux/ethtool.h>, and exit
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

static int seq;

static const char *cmdname(__u32 cmd)
{
	switch (cmd) {
	case ETHTOOL_GRXRINGS: return "GRXRINGS";
	case ETHTOOL_GRXCLSRLCNT: return "GRXCLSRLCNT";
	case ETHTOOL_GRXCLSRULE: return "GRXCLSRULE";
	case ETHTOOL_GRXCLSRLALL: return "GRXCLSRLALL";
	case ETHTOOL_SRXCLSRLDEL: return "SRXCLSRLDEL";
	case ETHTOOL_SRXCLSRLINS: return "SRXCLSRLINS";
	case ETHTOOL_GFLAGS: return "GFLAGS";
	case ETHTOOL_SRXNTUPLE: return "SRXNTUPLE";
	default: return "OTHER";
	}
}

static int is_rxnfc(__u32 cmd)
{
	return cmd == ETHTOOL_GRXRINGS || cmd == ETHTOOL_GRXCLSRLCNT ||
	       cmd == ETHTOOL_GRXCLSRULE || cmd == ETHTOOL_GRXCLSRLALL ||
	       cmd == ETHTOOL_SRXCLSRLDEL || cmd == ETHTOOL_SRXCLSRLINS;
}

static void dump(const struct ifreq *ifr)
{
	const char *dir = getenv("SHIM_OUT");
	const unsigned char *p = (const unsigned char *)ifr->ifr_data;
	__u32 cmd;
	size_t n, i;
	char path[4096];
	FILE *f;

	if (!dir)
		return;
	memcpy(&cmd, p, 4);
	n = 4;
	if (is_rxnfc(cmd)) {
		const struct ethtool_rxnfc *nfc = (const void *)p;
		n = sizeof(*nfc);
		if (cmd == ETHTOOL_GRXCLSRLALL)
			n += nfc->rule_cnt * sizeof(__u32);
	} else if (cmd == ETHTOOL_GFLAGS) {
		n = sizeof(struct ethtool_value);
	}
	snprintf(path, sizeof(path), "%s/%02d-%s.hex", dir, seq++, cmdname(cmd));
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "# SIOCETHTOOL request, cmd 0x%x (%s), ifr_name %.16s, %zu bytes\n",
		cmd, cmdname(cmd), ifr->ifr_name, n);
	for (i = 0; i < n; i++)
		fprintf(f, "%02x%s", p[i], (i % 16 == 15 || i == n - 1) ? "\n" : " ");
	fclose(f);
}

static int fake(struct ifreq *ifr)
{
	const char *dir = getenv("SHIM_FAKE");
	struct ethtool_rxnfc *nfc = (void *)ifr->ifr_data;
	unsigned locs[64];
	unsigned n = 0, i;
	char path[4096];
	FILE *f;

	if (!dir || !is_rxnfc(nfc->cmd))
		return -2;
	snprintf(path, sizeof(path), "%s/locs", dir);
	f = fopen(path, "r");
	if (f) {
		while (n < 64 && fscanf(f, "%u", &locs[n]) == 1)
			n++;
		fclose(f);
	}
	switch (nfc->cmd) {
	case ETHTOOL_GRXRINGS:
		nfc->data = 4;
		return 0;
	case ETHTOOL_GRXCLSRLCNT:
		nfc->data = 2048;
		nfc->rule_cnt = n;
		return 0;
	case ETHTOOL_GRXCLSRLALL:
		if (nfc->rule_cnt < n) {
			errno = EMSGSIZE;
			return -1;
		}
		nfc->data = 2048;
		nfc->rule_cnt = n;
		for (i = 0; i < n; i++)
			nfc->rule_locs[i] = locs[i];
		return 0;
	case ETHTOOL_GRXCLSRULE: {
		struct ethtool_rxnfc r;
		snprintf(path, sizeof(path), "%s/rule-%u.bin", dir, nfc->fs.location);
		f = fopen(path, "r");
		if (!f || fread(&r, sizeof(r), 1, f) != 1) {
			if (f)
				fclose(f);
			errno = ENOENT;
			return -1;
		}
		fclose(f);
		nfc->fs = r.fs;
		nfc->data = 2048;
		return 0;
	}
	}
	errno = EOPNOTSUPP;
	return -1;
}

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, void *);
	va_list ap;
	void *arg;
	int rc;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (int (*)(int, unsigned long, void *))dlsym(RTLD_NEXT, "ioctl");
	if (req == SIOCETHTOOL) {
		dump(arg);
		rc = fake(arg);
		if (rc != -2)
			return rc;
	}
	return real(fd, req, arg);
}

__attribute__((constructor)) static void layout(void)
{
	const char *out = getenv("SHIM_LAYOUT");
	FILE *f;

	if (!out)
		return;
	f = fopen(out, "w");
	if (!f)
		exit(1);
#define P(name, v) fprintf(f, "%s %zu\n", name, (size_t)(v))
	P("sizeof(struct ifreq)", sizeof(struct ifreq));
	P("offsetof(struct ifreq, ifr_data)", offsetof(struct ifreq, ifr_data));
	P("sizeof(struct ethtool_rxnfc)", sizeof(struct ethtool_rxnfc));
	P("offsetof(struct ethtool_rxnfc, flow_type)", offsetof(struct ethtool_rxnfc, flow_type));
	P("offsetof(struct ethtool_rxnfc, data)", offsetof(struct ethtool_rxnfc, data));
	P("offsetof(struct ethtool_rxnfc, fs)", offsetof(struct ethtool_rxnfc, fs));
	P("offsetof(struct ethtool_rxnfc, rule_cnt)", offsetof(struct ethtool_rxnfc, rule_cnt));
	P("offsetof(struct ethtool_rxnfc, rule_locs)", offsetof(struct ethtool_rxnfc, rule_locs));
	P("sizeof(struct ethtool_rx_flow_spec)", sizeof(struct ethtool_rx_flow_spec));
	P("offsetof(struct ethtool_rx_flow_spec, h_u)", offsetof(struct ethtool_rx_flow_spec, h_u));
	P("offsetof(struct ethtool_rx_flow_spec, h_ext)", offsetof(struct ethtool_rx_flow_spec, h_ext));
	P("offsetof(struct ethtool_rx_flow_spec, m_u)", offsetof(struct ethtool_rx_flow_spec, m_u));
	P("offsetof(struct ethtool_rx_flow_spec, m_ext)", offsetof(struct ethtool_rx_flow_spec, m_ext));
	P("offsetof(struct ethtool_rx_flow_spec, ring_cookie)", offsetof(struct ethtool_rx_flow_spec, ring_cookie));
	P("offsetof(struct ethtool_rx_flow_spec, location)", offsetof(struct ethtool_rx_flow_spec, location));
	P("sizeof(union ethtool_flow_union)", sizeof(union ethtool_flow_union));
	P("sizeof(struct ethtool_flow_ext)", sizeof(struct ethtool_flow_ext));
	P("sizeof(struct ethtool_tcpip4_spec)", sizeof(struct ethtool_tcpip4_spec));
	P("offsetof(struct ethtool_tcpip4_spec, psrc)", offsetof(struct ethtool_tcpip4_spec, psrc));
	P("offsetof(struct ethtool_tcpip4_spec, tos)", offsetof(struct ethtool_tcpip4_spec, tos));
	P("sizeof(struct ethtool_tcpip6_spec)", sizeof(struct ethtool_tcpip6_spec));
	P("offsetof(struct ethtool_tcpip6_spec, ip6dst)", offsetof(struct ethtool_tcpip6_spec, ip6dst));
	P("offsetof(struct ethtool_tcpip6_spec, psrc)", offsetof(struct ethtool_tcpip6_spec, psrc));
	P("offsetof(struct ethtool_tcpip6_spec, tclass)", offsetof(struct ethtool_tcpip6_spec, tclass));
	P("sizeof(struct ethtool_rxfh_indir)", sizeof(struct ethtool_rxfh_indir));
	P("offsetof(struct ethtool_rxfh_indir, ring_index)", offsetof(struct ethtool_rxfh_indir, ring_index));
	P("sizeof(struct ethtool_drvinfo)", sizeof(struct ethtool_drvinfo));
	P("offsetof(struct ethtool_drvinfo, driver)", offsetof(struct ethtool_drvinfo, driver));
	P("sizeof(struct ethtool_sset_info)", sizeof(struct ethtool_sset_info));
	P("offsetof(struct ethtool_sset_info, data)", offsetof(struct ethtool_sset_info, data));
	P("sizeof(struct ethtool_gstrings)", sizeof(struct ethtool_gstrings));
	P("offsetof(struct ethtool_gstrings, data)", offsetof(struct ethtool_gstrings, data));
	P("sizeof(struct ethtool_gfeatures)", sizeof(struct ethtool_gfeatures));
	P("offsetof(struct ethtool_gfeatures, features)", offsetof(struct ethtool_gfeatures, features));
	P("sizeof(struct ethtool_get_features_block)", sizeof(struct ethtool_get_features_block));
	P("sizeof(struct ethtool_channels)", sizeof(struct ethtool_channels));
	fclose(f);
	exit(0);
}
