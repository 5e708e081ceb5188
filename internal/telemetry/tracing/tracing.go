// Package tracing builds keygate's OpenTelemetry tracer provider: the SDK
// with a batching OTLP exporter (gRPC or HTTP/protobuf), configured by the
// configuration file's tracing section and the standard OTEL_* environment
// variables, which win over the file.
//
// Exporting never holds a request up: spans wait in a bounded queue that a
// background goroutine sends in batches, and spans that find the queue full
// are dropped; a dead or slow collector costs failed exports, logged at
// most once a minute, not latency. Shutdown sends what is queued, within
// its context's deadline.
//
// The exporter's headers, which often hold an API key, are read only from
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS, and
// never logged.
package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"

	"github.com/keygate/keygate/internal/config"
	"github.com/keygate/keygate/internal/telemetry"
)

// Protocols of the OTLP exporter.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Provider is the tracer provider of a running keygate. A nil *Provider is
// tracing off: its Tracer is nil and its Shutdown does nothing.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer *telemetry.Tracer
}

// Options are what New takes besides the configuration section.
type Options struct {
	// Getenv reads the environment (default os.Getenv). The exporter
	// itself reads its OTEL_EXPORTER_OTLP_* variables (headers, timeout,
	// compression, certificates) from the process environment.
	Getenv func(string) string
	Logger *slog.Logger // export failures, at most once a minute
	// Exporter, if set, replaces the OTLP exporter: for tests.
	Exporter sdktrace.SpanExporter
}

// Enabled reports whether cfg and the environment turn tracing on (see
// config.Tracing.Enabled), or why the environment is wrong.
func Enabled(cfg config.Tracing, getenv func(string) string) (bool, error) {
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); strings.EqualFold(v, "true") {
		return false, nil
	}
	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "none":
		return false, nil
	case "otlp":
		return true, nil
	case "":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: keygate exports otlp or none", v)
	}
	return cfg.Enabled || getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
}

// New returns the provider cfg and the environment describe; nil, and no
// error, when they leave tracing off. It does not connect: the first
// export does, in the background.
func New(ctx context.Context, cfg config.Tracing, o Options) (*Provider, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	on, err := Enabled(cfg, o.Getenv)
	if err != nil || !on {
		return nil, err
	}
	exp := o.Exporter
	if exp == nil {
		if exp, err = exporter(ctx, cfg, o.Getenv); err != nil {
			return nil, err
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = "keygate"
	}
	// WithFromEnv comes last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// win over the file.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if o.Getenv("OTEL_TRACES_SAMPLER") == "" {
		// Otherwise the SDK reads OTEL_TRACES_SAMPLER(_ARG) itself.
		ratio := 1.0
		if cfg.SampleRatio != nil {
			ratio = *cfg.SampleRatio
		}
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))))
	}
	setErrorHandler(o.Logger)
	tp := sdktrace.NewTracerProvider(opts...)
	return &Provider{tp: tp, tracer: telemetry.NewTracer(tp)}, nil
}

// Tracer returns the tracer the front ends start spans with; nil when
// tracing is off.
func (p *Provider) Tracer() *telemetry.Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Shutdown sends the spans still queued and stops the exporter, giving up
// when ctx ends.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// Protocol is the OTLP protocol in force: the environment's, the file's,
// or http/protobuf.
func Protocol(cfg config.Tracing, getenv func(string) string) string {
	for _, v := range []string{getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), getenv("OTEL_EXPORTER_OTLP_PROTOCOL"), cfg.Protocol} {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ProtocolHTTP
}

// exporter builds the OTLP exporter. The file's endpoint and CA apply only
// where the environment names no endpoint: the exporter reads that, with
// its certificates, itself.
func exporter(ctx context.Context, cfg config.Tracing, getenv func(string) string) (sdktrace.SpanExporter, error) {
	fromFile := cfg.Endpoint != "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == ""
	var tlsConf *tls.Config
	if fromFile && cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("tracing.ca_file: no PEM certificate in it")
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	switch p := Protocol(cfg, getenv); p {
	case ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if fromFile {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
			if tlsConf != nil {
				opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tlsConf)))
			}
		}
		return otlptracegrpc.New(ctx, opts...)
	case ProtocolHTTP:
		var opts []otlptracehttp.Option
		if fromFile {
			u, err := url.Parse(cfg.Endpoint)
			if err != nil {
				return nil, errors.New("tracing.endpoint is not a URL")
			}
			if u.Path == "" || u.Path == "/" {
				// As OTEL_EXPORTER_OTLP_ENDPOINT: a base URL, the
				// signal's path appended.
				u.Path = "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
			if tlsConf != nil {
				opts = append(opts, otlptracehttp.WithTLSClientConfig(tlsConf))
			}
		}
		return otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("tracing protocol %q: keygate exports over grpc or http/protobuf", p)
	}
}

// errorLog is where the SDK's errors (failed exports, dropped spans) go:
// one process-wide handler, as the SDK has, logging at most once a
// minute so that a dead collector does not flood the log.
var errorLog struct {
	once sync.Once
	mu   sync.Mutex
	log  *slog.Logger
	last time.Time
	n    int
}

func setErrorHandler(log *slog.Logger) {
	errorLog.mu.Lock()
	errorLog.log = log
	errorLog.mu.Unlock()
	errorLog.once.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			errorLog.mu.Lock()
			defer errorLog.mu.Unlock()
			errorLog.n++
			if now := time.Now(); now.Sub(errorLog.last) >= time.Minute {
				errorLog.log.Warn("tracing: exporting spans failed (spans are dropped, requests are not affected)",
					"err", err, "errors", strconv.Itoa(errorLog.n))
				errorLog.last, errorLog.n = now, 0
			}
		}))
	})
}
