package fibbench

// The generated fibbench_bpfel.go and fibbench_bpfel.o are committed, so
// building needs no clang; rerun this after editing fibbench.c or
// fe/datapath/bpf/*.h (and fe/datapath's go generate with it).
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type lpm_key -type lpm_key6 fibbench fibbench.c -- -I/usr/include/x86_64-linux-gnu
