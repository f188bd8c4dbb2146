package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	splitplanev1 "github.com/splitplane/splitplane/api/splitplane/v1"
	"github.com/splitplane/splitplane/forces"
	"github.com/splitplane/splitplane/internal/cli"
)

// The API commands (route, fe list, bgp, classifier, top) are pure gRPC
// clients of the CE's API. This file holds what they share: the connection
// flags, the dial, and the exit codes scripts rely on.

// defaultAPI is where the CE serves its API unless api_listen says otherwise.
const defaultAPI = "unix:/run/splitplane/ce-api.sock"

// Exit codes of the API commands.
const (
	exitOK            = 0
	exitFailure       = 1 // the call failed: API unreachable, server error
	exitUsage         = 2 // bad flags or arguments, or InvalidArgument
	exitNotFound      = 3 // NotFound
	exitAlreadyExists = 4 // AlreadyExists
)

// exitCodesHelp is appended to the help of every API command.
const exitCodesHelp = `
Exit codes:
  0  ok
  1  failure (the API is unreachable, the server failed, ...)
  2  usage error: bad flags or arguments, or the server refused the request
     as invalid (InvalidArgument; the message names the field and value)
  3  not found (NotFound)
  4  already exists (AlreadyExists)`

// apiError is a failed API call: the server's status, with the exit code it
// maps to.
type apiError struct {
	op   string // "route del 10.0.0.0/8"
	code codes.Code
	msg  string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.op, e.msg, e.code)
}

// exitCode maps the gRPC status code onto the exit codes of the API commands.
func (e *apiError) exitCode() int {
	switch e.code {
	case codes.InvalidArgument:
		return exitUsage
	case codes.NotFound:
		return exitNotFound
	case codes.AlreadyExists:
		return exitAlreadyExists
	}
	return exitFailure
}

// callError turns the error of an RPC into an *apiError naming op; nil stays
// nil.
func callError(op string, api string, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	msg := st.Message()
	if st.Code() == codes.Unavailable {
		msg += fmt.Sprintf(" (is the CE running and serving its API at %s? see --api)", api)
	}
	return &apiError{op: op, code: st.Code(), msg: msg}
}

// usageError marks err as a usage error (exit code 2), naming the command's
// usage line.
func usageError(cmd *cobra.Command, err error) error {
	return fmt.Errorf("%w: %s: %v", cli.ErrUsage, cmd.UseLine(), err)
}

// usageArgs makes an argument check's error a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError(cmd, err)
		}
		return nil
	}
}

// apiFlags are the connection flags every API command has.
type apiFlags struct {
	addr      string
	tokenFile string
	tls       forces.TLSConfig
	timeout   time.Duration
}

// register adds the flags to cmd as persistent flags, and makes flag errors
// of cmd and its subcommands usage errors.
func (f *apiFlags) register(cmd *cobra.Command) {
	def := defaultAPI
	if env := os.Getenv("SPLITPLANE_API"); env != "" {
		def = env
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.addr, "api", def, "the CE's API: unix:PATH or tcp:HOST:PORT ($SPLITPLANE_API sets the default; without either, and no socket there, the one running lab's)")
	pf.StringVar(&f.tokenFile, "token-file", "", "file holding the bearer token the API requires")
	pf.StringVar(&f.tls.Cert, "tls-cert", "", "client certificate (PEM) for mutual TLS on tcp:")
	pf.StringVar(&f.tls.Key, "tls-key", "", "client key (PEM) for mutual TLS on tcp:")
	pf.StringVar(&f.tls.CA, "tls-ca", "", "CA bundle (PEM) the server's certificate must chain to")
	pf.DurationVar(&f.timeout, "timeout", 10*time.Second, "deadline of each call (route watch: of none)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
}

// bearer sends a bearer token with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the token also goes over unix sockets
// and TCP without TLS, which the CE allows when it has a token configured.
func (bearer) RequireTransportSecurity() bool { return false }

// apiConn is a connection to the API with its clients.
type apiConn struct {
	cc         *grpc.ClientConn
	addr       string
	timeout    time.Duration
	routes     splitplanev1.RoutesClient
	fes        splitplanev1.FEsClient
	bgp        splitplanev1.BGPClient
	classifier splitplanev1.ClassifierClient
}

// dial checks the flags and makes the (lazy) connection; errors are usage
// errors, except an unreadable token file or TLS material.
func (f *apiFlags) dial(cmd *cobra.Command) (*apiConn, error) {
	if f.timeout <= 0 {
		return nil, usageError(cmd, fmt.Errorf("--timeout %v: must be positive", f.timeout))
	}
	addr, err := resolveAPI(cmd, f.addr, cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	f.addr = addr
	var target, host string
	switch {
	case strings.HasPrefix(f.addr, "unix:"):
		path := strings.TrimPrefix(f.addr, "unix:")
		if path == "" {
			return nil, usageError(cmd, fmt.Errorf("--api %q: empty socket path", f.addr))
		}
		target = "unix:" + path
	case strings.HasPrefix(f.addr, "tcp:"):
		hp := strings.TrimPrefix(f.addr, "tcp:")
		h, _, err := net.SplitHostPort(hp)
		if err != nil || h == "" {
			return nil, usageError(cmd, fmt.Errorf("--api %q: want tcp:HOST:PORT", f.addr))
		}
		target, host = "passthrough:///"+hp, h
	default:
		return nil, usageError(cmd, fmt.Errorf("--api %q: want unix:PATH or tcp:HOST:PORT", f.addr))
	}

	creds := insecure.NewCredentials()
	if f.tls != (forces.TLSConfig{}) {
		if host == "" {
			return nil, usageError(cmd, fmt.Errorf("--tls-cert/--tls-key/--tls-ca: only with --api tcp:HOST:PORT"))
		}
		if f.tls.Cert == "" || f.tls.Key == "" || f.tls.CA == "" {
			return nil, usageError(cmd, fmt.Errorf("mutual TLS needs all of --tls-cert, --tls-key and --tls-ca"))
		}
		cfg, err := f.tls.ClientTLS(host)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("--token-file %s: empty", f.tokenFile)
		}
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(tok)))
	}
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, usageError(cmd, fmt.Errorf("--api %q: %w", f.addr, err))
	}
	return &apiConn{
		cc: cc, addr: f.addr, timeout: f.timeout,
		routes:     splitplanev1.NewRoutesClient(cc),
		fes:        splitplanev1.NewFEsClient(cc),
		bgp:        splitplanev1.NewBGPClient(cc),
		classifier: splitplanev1.NewClassifierClient(cc),
	}, nil
}

// call runs one call with the --timeout deadline and turns its error into an
// *apiError naming op.
func (c *apiConn) call(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return callError(op, c.addr, fn(ctx))
}

// Close closes the connection.
func (c *apiConn) Close() error { return c.cc.Close() }

// withAPI runs fn with a connection made from the flags, closing it after.
func withAPI(cmd *cobra.Command, f *apiFlags, fn func(c *apiConn) error) error {
	c, err := f.dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// outputFlag adds -o/--output (table or json) to a listing.
func outputFlag(cmd *cobra.Command, out *string) {
	cmd.Flags().StringVarP(out, "output", "o", "table", "output format: table (aligned columns) or json")
}

// checkOutput validates -o.
func checkOutput(cmd *cobra.Command, out string) error {
	if out != "table" && out != "json" {
		return usageError(cmd, fmt.Errorf("-o %q: want table or json", out))
	}
	return nil
}

// groupCmd is a command that only holds subcommands: alone it prints its
// help; an unknown subcommand is a usage error (not a silent help, exit 0).
func groupCmd(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usageError(cmd, fmt.Errorf("unknown command %q", args[0]))
		},
	}
}

// addAPICommands adds the API's client commands to root: route, bgp,
// classifier and top, and list under the existing fe command.
func addAPICommands(root *cobra.Command) {
	root.AddCommand(routeCmd(), bgpCmd(), classifierCmd(), topCmd())
	for _, c := range root.Commands() {
		if c.Name() == "fe" {
			c.AddCommand(feListCmd(), feVerifyCmd(), feMeshCmd())
		}
	}
}
