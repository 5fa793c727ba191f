package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisStartsAndStops starts a redis-server, uses it, and shows that
// Kill ends the process (its port refuses connections afterwards).
func TestRedisStartsAndStops(t *testing.T) {
	r := StartRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET k = %q, %v", v, err)
	}
	r.Kill()
	if conn, err := net.DialTimeout("tcp", r.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("redis-server still accepts connections after Kill")
	}
}

func TestRedisArgs(t *testing.T) {
	r := StartRedis(t, "--requirepass", "s3cret")
	ctx := context.Background()
	if err := r.Client(t).Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("PING without the password: %v, want NOAUTH", err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, Password: "s3cret"})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING with the password: %v", err)
	}
}

// TestHAProxyForwards puts haproxy in front of a loopback HTTP server.
func TestHAProxyForwards(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "behind haproxy") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	front := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	cfg := fmt.Sprintf(`global
    maxconn 100
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind %s
    default_backend be
backend be
    server s1 %s
`, front, l.Addr())
	StartHAProxy(t, cfg, front)
	resp, err := http.Get("http://" + front + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "behind haproxy" {
		t.Errorf("got %q", body)
	}
}
