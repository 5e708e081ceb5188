package testnet

import (
	"crypto/tls"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisTLS starts a redis-server on 127.0.0.1 that speaks TLS only, with
// the certificate in certFile and keyFile, and requires a client
// certificate from the CAs in caFile (Redis's default, tls-auth-clients
// yes). client must be a config that Redis accepts; RedisTLS waits until a
// PING with it is answered and returns the server's host:port. The server
// is stopped when the test ends. Like RedisCluster it skips without
// redis-server on PATH unless KEYGATE_REQUIRE_REDIS_CLUSTER is set.
func RedisTLS(t testing.TB, certFile, keyFile, caFile string, client *tls.Config) string {
	t.Helper()
	port := strconv.Itoa(clusterPort(t))
	addr := "127.0.0.1:" + port
	startRedisServer(t, "Redis TLS", &redis.Options{Addr: addr, TLSConfig: client, DialTimeout: time.Second, MaxRetries: -1},
		"--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "yes", "--dir", t.TempDir(), "--save", "", "--appendonly", "no")
	return addr
}
