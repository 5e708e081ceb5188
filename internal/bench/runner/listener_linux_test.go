package runner

import (
	"net"
	"os"
	"testing"
)

func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() {
		t.Errorf("ListenerPID(%s) = %d, want this process %d", ln.Addr(), pid, os.Getpid())
	}
	addr := ln.Addr().String()
	ln.Close()
	if pid, err := ListenerPID(addr); err == nil {
		t.Errorf("ListenerPID(%s) after close = %d, want an error", addr, pid)
	}
	if _, err := ListenerPID("no-port"); err == nil {
		t.Error("ListenerPID(no-port): no error")
	}
}

func TestListeningInodes(t *testing.T) {
	table := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 222 1 0000000000000000 20 4 30 10 -1
   2: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0000000000000000 100 0 0 10 0
   3: garbage
`)
	for _, c := range []struct {
		port uint16
		want string
	}{{8080, "111"}, {8081, "333"}, {8082, ""}} {
		got := listeningInodes(table, c.port)
		if (c.want == "" && len(got) != 0) || (c.want != "" && (len(got) != 1 || got[0] != c.want)) {
			t.Errorf("port %d: inodes %v, want [%s]", c.port, got, c.want)
		}
	}
}

func TestRoundOrderAlternates(t *testing.T) {
	for r, want := range [][]int{{0, 1, 2}, {2, 1, 0}, {0, 1, 2}} {
		got := roundOrder(3, r)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("round %d: order %v, want %v", r, got, want)
				break
			}
		}
	}
}
