package extauthz

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// readmeEnvoyBlock returns the README's Envoy block: the yaml code block
// of the section "Behind Envoy (ext_authz over gRPC)".
func readmeEnvoyBlock(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Behind Envoy (ext_authz over gRPC)\n")
	if !ok {
		t.Fatal("docs/gateway.md has no section \"Behind Envoy (ext_authz over gRPC)\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "\n```yaml\n")
	if !ok {
		t.Fatal("the Envoy section has no yaml block")
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	return block
}

// TestREADMEEnvoyBlock loads the README's Envoy block as Envoy would: YAML
// into its v3 Bootstrap protobuf types (go-control-plane, generated from
// Envoy's API), every typed_config unpacked, with the protoc-gen-validate
// rules Envoy enforces at load. It checks the fields the set-up depends
// on, then calls keygate's gRPC server at the keygate cluster's address
// (moved to a free port) within the filter's timeout, as Envoy would.
// Envoy itself is not installed here.
func TestREADMEEnvoyBlock(t *testing.T) {
	block := readmeEnvoyBlock(t)
	var doc any
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("the block is not YAML: %v", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("the block is not an Envoy v3 bootstrap: %v", err)
	}
	if err := bs.ValidateAll(); err != nil {
		t.Fatalf("Envoy's validation: %v", err)
	}

	var ea *extauthzv3.ExtAuthz
	var filters []string
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				m, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					t.Fatalf("filter %s: %v", f.GetName(), err)
				}
				hcm, ok := m.(*hcmv3.HttpConnectionManager)
				if !ok {
					t.Fatalf("filter %s is a %T", f.GetName(), m)
				}
				if err := hcm.ValidateAll(); err != nil {
					t.Fatalf("%s: %v", f.GetName(), err)
				}
				for _, hf := range hcm.GetHttpFilters() {
					filters = append(filters, hf.GetName())
					m, err := hf.GetTypedConfig().UnmarshalNew()
					if err != nil {
						t.Fatalf("http filter %s: %v", hf.GetName(), err)
					}
					if v, ok := m.(interface{ ValidateAll() error }); ok {
						if err := v.ValidateAll(); err != nil {
							t.Fatalf("http filter %s: %v", hf.GetName(), err)
						}
					}
					if hf.GetName() == "envoy.filters.http.ext_authz" {
						ea, _ = m.(*extauthzv3.ExtAuthz)
					}
				}
			}
		}
	}
	if strings.Join(filters, ",") != "envoy.filters.http.ext_authz,envoy.filters.http.router" || ea == nil {
		t.Fatalf("http_filters %v: want ext_authz (an ExtAuthz) before the router", filters)
	}
	if ea.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("transport_api_version %v, want V3", ea.GetTransportApiVersion())
	}
	if !strings.Contains(block, "failure_mode_allow: false") || ea.GetFailureModeAllow() {
		t.Error("failure_mode_allow must be written, and false")
	}
	if ea.GetWithRequestBody() != nil || strings.Contains(block, "with_request_body") {
		t.Error("with_request_body is set: keygate decides on headers alone")
	}
	if ea.GetHttpService() != nil || ea.GetGrpcService().GetEnvoyGrpc().GetClusterName() != "keygate" {
		t.Errorf("grpc_service %v: want envoy_grpc to the cluster keygate", ea.GetGrpcService())
	}
	timeout := ea.GetGrpcService().GetTimeout().AsDuration()
	if timeout <= 0 {
		t.Error("grpc_service has no timeout")
	}

	var keygate *clusterv3.Cluster
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() == "keygate" {
			keygate = c
		}
	}
	if keygate == nil {
		t.Fatal("no cluster keygate")
	}
	any := keygate.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
	var po httpv3.HttpProtocolOptions
	if any == nil || any.UnmarshalTo(&po) != nil || po.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Fatalf("the keygate cluster does not speak HTTP/2 (explicit_http_config.http2_protocol_options): %v", keygate)
	}
	eps := keygate.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		t.Fatalf("keygate cluster endpoints %v", eps)
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	addr := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
	if !strings.Contains(block, "--envoy-grpc-listen "+addr) {
		t.Errorf("the block's comment does not run keygate on the cluster's address %s", addr)
	}

	// Envoy's call, to keygate on a free port of the same host.
	f := newFixture(t)
	srv := NewServer(f.svc, ServerOptions{})
	ln, err := net.Listen("tcp", net.JoinHostPort(sa.GetAddress(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, checkRequest("GET", "app.example.com", "/orders",
		map[string]string{"authorization": "Bearer " + f.sign(t, "ES256", nil)}))
	if err != nil || resp.GetOkResponse() == nil {
		t.Fatalf("Check at the cluster's address within %s: %v %v", timeout, resp, err)
	}
}
