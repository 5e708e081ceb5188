package node

import (
	"context"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/keygate/keygate/internal/telemetry"
)

// redisTrace gives each Redis command run under a recording span a child
// span, keygate.redis.<command> (keygate.redis.pipeline for a pipeline),
// named by the command alone: its arguments (revoked token ids, rate-limit
// keys) are never recorded. Commands without a recording span, the
// background sync among them, cost one context lookup.
type redisTrace struct{}

var _ redis.Hook = redisTrace{}

// DialHook adds nothing: a dial is part of the span of the command that
// needed it.
func (redisTrace) DialHook(next redis.DialHook) redis.DialHook { return next }

func (redisTrace) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmd)
		}
		ctx, span := telemetry.StartChild(ctx, "keygate.redis."+cmd.Name(), trace.SpanKindClient)
		defer span.End()
		span.SetAttributes(attribute.String("db.system.name", "redis"))
		err := next(ctx, cmd)
		if err != nil && err != redis.Nil {
			telemetry.Fail(span, "redis_error") // the error's text may quote a key
		}
		return err
	}
}

func (redisTrace) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmds)
		}
		ctx, span := telemetry.StartChild(ctx, "keygate.redis.pipeline", trace.SpanKindClient)
		defer span.End()
		span.SetAttributes(attribute.String("db.system.name", "redis"), attribute.Int("keygate.redis.commands", len(cmds)))
		err := next(ctx, cmds)
		if err != nil && err != redis.Nil {
			telemetry.Fail(span, "redis_error")
		}
		return err
	}
}
