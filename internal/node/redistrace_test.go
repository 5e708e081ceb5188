package node

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keygate/keygate/internal/testnet"
)

// TestRedisTrace: a command or pipeline run under a recording span gets a
// child span named for the command, with no argument recorded; one run
// without a span gets none.
func TestRedisTrace(t *testing.T) {
	c := testnet.RedisClient(t, nil)
	c.AddHook(redisTrace{})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	const secretKey = "keygate-test:redistrace:a-revoked-jti-0123456789"
	t.Cleanup(func() { c.Del(context.Background(), secretKey) })

	c.Set(context.Background(), secretKey, "1", 0) // no span: not traced
	ctx, root := tp.Tracer("test").Start(context.Background(), "root")
	if err := c.Get(ctx, secretKey).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, secretKey+"-missing").Err(); err != redis.Nil {
		t.Fatalf("GET of a missing key: %v", err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Exists(ctx, secretKey)
		p.TTL(ctx, secretKey)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	root.End()
	// Opening a connection (HELLO, CLIENT SETINFO) may add spans under the
	// command that needed it; the request's own commands are its children.
	var names []string
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); len(v) >= 16 && contains(secretKey, v) {
				t.Errorf("%s %s holds the key: %q", s.Name, kv.Key, v)
			}
		}
		if s.Parent.SpanID() != root.SpanContext().SpanID() {
			continue
		}
		names = append(names, s.Name)
		if s.Status.Code != 0 {
			t.Errorf("%s failed: %v (redis.Nil is an answer, not an error)", s.Name, s.Status)
		}
	}
	want := []string{"keygate.redis.get", "keygate.redis.get", "keygate.redis.pipeline"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("the request's spans %q, want %q", names, want)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
