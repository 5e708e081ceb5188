package config

import (
	"strings"
	"testing"
)

func TestTLSSections(t *testing.T) {
	c, err := Load(writeConfig(t, `
tls: {cert_file: /etc/keygate/tls.crt, key_file: /etc/keygate/tls.key}
admin_tls: {cert_file: /etc/keygate/admin.crt, key_file: /etc/keygate/admin.key, client_ca_file: /etc/keygate/operators.pem}
token_service:
  redis_url: rediss://cache:6380
  redis_ca_file: /etc/keygate/redis-ca.pem
  redis_cert_file: /etc/keygate/redis.crt
  redis_key_file: /etc/keygate/redis.key
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS != (TLS{CertFile: "/etc/keygate/tls.crt", KeyFile: "/etc/keygate/tls.key"}) || !c.TLS.Enabled() {
		t.Errorf("tls %+v", c.TLS)
	}
	if c.AdminTLS.CertFile != "/etc/keygate/admin.crt" || c.AdminTLS.KeyFile != "/etc/keygate/admin.key" ||
		c.AdminTLS.ClientCAFile != "/etc/keygate/operators.pem" || !c.AdminTLS.Enabled() {
		t.Errorf("admin_tls %+v", c.AdminTLS)
	}
	if ts := c.TokenService; ts.RedisCAFile != "/etc/keygate/redis-ca.pem" || ts.RedisCertFile != "/etc/keygate/redis.crt" || ts.RedisKeyFile != "/etc/keygate/redis.key" {
		t.Errorf("token_service %+v", ts)
	}
	var none Config
	if none.TLS.Enabled() || none.AdminTLS.Enabled() {
		t.Error("an empty section is enabled")
	}
}

func TestTLSErrors(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{`tls: {cert_file: a.crt}`, "tls.key_file: is required with tls.cert_file"},
		{`tls: {key_file: a.key}`, "tls.cert_file: is required with tls.key_file"},
		{`tls: {cert_file: a.crt, key_file: a.key, client_ca_file: ca.pem}`, `tls (line 1): unknown field "client_ca_file"`},
		{`admin_tls: {cert_file: a.crt}`, "admin_tls.key_file: is required with admin_tls.cert_file"},
		{`admin_tls: {key_file: a.key}`, "admin_tls.cert_file: is required with admin_tls.key_file"},
		{`admin_tls: {client_ca_file: ca.pem}`, "admin_tls.client_ca_file: needs admin_tls.cert_file and admin_tls.key_file"},
		{"admin_listen: \"off\"\nadmin_tls: {cert_file: a.crt, key_file: a.key}", "admin_tls: is set but the admin listener is off"},
		{"probe_tls: {cert_file: a.crt}", `the file (line 1): unknown field "probe_tls"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := Load(writeConfig(t, tt.yaml), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}
