package forces

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRequestSetupRefusesWrongResponder: a Setup Response from an ID that
// is not a CE, from another CE than the one asked, to another FE, or for
// another setup is refused, however successful its result.
func TestRequestSetupRefusesWrongResponder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		asked ID
		edit  func(h *Header)
		want  string // in the error; "" for success
	}{
		{"any CE answers", CEID(0), func(h *Header) { h.Src = CEID(7) }, ""},
		{"the CE asked answers", CEID(7), func(h *Header) { h.Src = CEID(7) }, ""},
		{"an FE ID", CEID(0), func(h *Header) { h.Src = FEID(9) }, "FE(9), which is not a CE ID"},
		{"a broadcast ID", CEID(0), func(h *Header) { h.Src = AllBroadcast }, "not a CE ID"},
		{"another CE", CEID(7), func(h *Header) { h.Src = CEID(8) }, "from CE(8), asked CE(7)"},
		{"to another FE", CEID(0), func(h *Header) { h.Dst = FEID(2) }, "addressed to FE(2)"},
		{"another correlator", CEID(0), func(h *Header) { h.Correlator = 99 }, "correlator 0x63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			fe, ce := NewConn(a), NewConn(b)
			got := make(chan error, 1)
			go func() {
				_, err := RequestSetup(context.Background(), fe, testFE, tc.asked, 1, time.Second)
				got <- err
			}()
			req, err := ReadSetup(ce, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			resp := NewAssociationSetupResponse(req, uint32(SetupSuccess))
			tc.edit(&resp.Header)
			if err := ce.WriteMessage(resp); err != nil {
				t.Fatal(err)
			}
			err = <-got
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrSetupRefused) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err %v, want ErrSetupRefused saying %q", err, tc.want)
			}
		})
	}
}
