package server

import (
	"net"
	"net/url"
	"testing"
)

// The start line, the banner and the links in emails name the server by reachable: an IPv6
// link-local address is no address without its zone, and a URL writes the zone's % as %25.
func TestReachableKeepsTheZone(t *testing.T) {
	cases := []struct {
		addr       *net.TCPAddr
		host, want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}, "127.0.0.1", "127.0.0.1:3000"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 3000}, "::1", "[::1]:3000"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::fc:ff:fe00:1"), Port: 3651}, "fe80::fc:ff:fe00:1%eth0", "[fe80::fc:ff:fe00:1%25eth0]:3651"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth1"}, "fe80::1%eth1", "[fe80::1%25eth1]:80"},
	}
	for _, c := range cases {
		got := reachable(c.addr, c.host)
		if got != c.want {
			t.Errorf("reachable(%v, %q) = %q, want %q", c.addr, c.host, got, c.want)
			continue
		}
		u, err := url.Parse("http://" + got + "/api/v1")
		if err != nil {
			t.Errorf("%s is no URL: %v", got, err)
			continue
		}
		if u.Hostname() != c.host {
			t.Errorf("%s: the URL's host is %q, want %q", got, u.Hostname(), c.host)
		}
	}
}
