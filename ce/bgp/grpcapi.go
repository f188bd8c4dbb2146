package bgp

import (
	"fmt"
	"net"

	"github.com/osrg/gobgp/v4/pkg/server"
)

// apiOptions returns the GoBGP server options that serve GoBGP's own gRPC
// API (api.GoBgpService, what the gobgp CLI speaks) on c.APIListen, a TCP
// HOST:PORT; none when it is empty.
//
// GoBGP builds its gRPC service only inside NewBgpServer and listens from a
// goroutine that merely logs a failure, so the address is tried here first:
// a port in use or an address not of this host is an error of Start rather
// than a line in the log.
func (c *Config) apiOptions() ([]server.ServerOption, error) {
	if c.APIListen == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", c.APIListen)
	if err != nil {
		return nil, fmt.Errorf("bgp_api_listen %s: %w", c.APIListen, err)
	}
	l.Close()
	return []server.ServerOption{server.GrpcListenAddress(c.APIListen)}, nil
}
