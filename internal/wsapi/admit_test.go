package wsapi

import (
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClientAddr(t *testing.T) {
	t.Parallel()
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	cases := []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"Peer", "192.0.2.1:5000", nil, "192.0.2.1"},
		{"UntrustedPeerIgnoresHeader", "192.0.2.1:5000", []string{"198.51.100.7"}, "192.0.2.1"},
		{"TrustedPeerNamesClient", "10.0.0.5:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"RightmostUntrusted", "10.0.0.5:5000", []string{"203.0.113.9, 198.51.100.7, 10.0.0.6"}, "198.51.100.7"},
		{"SeveralHeaders", "10.0.0.5:5000", []string{"203.0.113.9", "198.51.100.7"}, "198.51.100.7"},
		{"AllTrusted", "10.0.0.5:5000", []string{"10.9.9.9"}, "10.9.9.9"},
		{"NoHeader", "10.0.0.5:5000", nil, "10.0.0.5"},
		{"GarbageStops", "10.0.0.5:5000", []string{"198.51.100.7, bogus"}, "10.0.0.5"},
		{"HopWithPort", "10.0.0.5:5000", []string{"198.51.100.7:4711"}, "198.51.100.7"},
		{"MappedPeer", "[::ffff:192.0.2.1]:5000", nil, "192.0.2.1"},
		{"IPv6CutTo64", "[2001:db8:1:2:3:4:5:6]:5000", nil, "2001:db8:1:2::"},
		{"TrustedIPv6Proxy", "[2001:db8:ffff::1]:443", []string{"2001:db8:aaaa:bbbb:1::2"}, "2001:db8:aaaa:bbbb::"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, ok := clientAddr(r, trusted)
			require.True(t, ok)
			require.Equal(t, netip.MustParseAddr(c.want), got)
		})
	}
	t.Run("UnreadablePeer", func(t *testing.T) {
		t.Parallel()
		_, ok := clientAddr(&http.Request{RemoteAddr: "pipe"}, trusted)
		require.False(t, ok)
	})
}

func TestAddrLimiter(t *testing.T) {
	t.Parallel()
	from := func(ip string) *http.Request { return &http.Request{RemoteAddr: ip + ":1"} }
	t0 := time.Unix(1_000_000, 0)

	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		require.Nil(t, newAddrLimiter(0, 10, nil))
	})

	t.Run("BurstThenRate", func(t *testing.T) {
		t.Parallel()
		l := newAddrLimiter(2, 3, nil)
		for range 3 {
			require.True(t, l.allow(from("192.0.2.1"), t0))
		}
		require.False(t, l.allow(from("192.0.2.1"), t0))
		require.True(t, l.allow(from("192.0.2.2"), t0), "another address has its own bucket")
		require.False(t, l.allow(from("192.0.2.1"), t0.Add(400*time.Millisecond)))
		require.True(t, l.allow(from("192.0.2.1"), t0.Add(500*time.Millisecond)), "one token every 1/rate s")
		require.Equal(t, 1, l.retryAfter())
		require.Equal(t, 10, newAddrLimiter(0.1, 1, nil).retryAfter())
	})

	t.Run("SweepForgetsRefilled", func(t *testing.T) {
		t.Parallel()
		l := newAddrLimiter(1, 2, nil)
		require.True(t, l.allow(from("192.0.2.1"), t0))
		require.True(t, l.allow(from("192.0.2.2"), t0))
		require.True(t, l.allow(from("192.0.2.2"), t0))
		require.True(t, l.allow(from("192.0.2.3"), t0.Add(sweepEvery).Add(-time.Millisecond)))
		// At the sweep .1 and .2 have refilled and are forgotten; .3, used
		// a moment ago, is kept.
		require.True(t, l.allow(from("192.0.2.4"), t0.Add(sweepEvery)))
		require.Len(t, l.buckets, 2)
		require.Contains(t, l.buckets, netip.MustParseAddr("192.0.2.3"))
		require.Contains(t, l.buckets, netip.MustParseAddr("192.0.2.4"))
	})

	t.Run("FullAdmitsUntracked", func(t *testing.T) {
		t.Parallel()
		l := newAddrLimiter(1, 1, nil)
		for i := range maxTrackedAddrs {
			a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
			require.True(t, l.allow(from(a.String()), t0))
		}
		require.Len(t, l.buckets, maxTrackedAddrs)
		for i := range 3 {
			require.True(t, l.allow(from("192.0.2."+strconv.Itoa(i)), t0), "past the cap a new address is admitted")
		}
		require.False(t, l.allow(from("10.0.0.0"), t0), "a tracked address keeps its bucket")
		require.Len(t, l.buckets, maxTrackedAddrs)
		// Once the buckets refill, the next sweep makes room.
		require.True(t, l.allow(from("192.0.2.9"), t0.Add(2*time.Second)))
		require.Len(t, l.buckets, 1)
	})
}
