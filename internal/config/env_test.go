package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// envSample is a value of a variable's type that ApplyEnv parses.
func envSample(v EnvVar) string {
	switch {
	case v.Type == "bool":
		return "true"
	case v.Type == "integer":
		return "7"
	case v.Type == "number":
		return "0.5"
	case v.Type == "duration":
		return "7s"
	case strings.HasPrefix(v.Type, "list of"):
		return "a.example,b.example"
	}
	return "set-by-" + v.Name
}

// fullConfig has every field the environment can set set, so that a
// variable that clears one shows.
func fullConfig(t *testing.T) *Config {
	t.Helper()
	var env []string
	for _, v := range EnvVars() {
		env = append(env, v.Name+"="+envSample(v))
	}
	c := new(Config)
	if err := c.ApplyEnv(env); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnvEmptyIsUnset: every KEYGATE_ variable of a field, and each alias,
// given empty (as Compose's ${VAR:-} and Helm templates give an optional
// value left out), changes nothing in a configuration with every field set,
// and is reported as ignored, never as set.
func TestEnvEmptyIsUnset(t *testing.T) {
	want := fullConfig(t)
	if reflect.DeepEqual(want, new(Config)) {
		t.Fatal("the full configuration is empty: the test would prove nothing")
	}
	names := map[string]string{}
	for _, v := range EnvVars() {
		names[v.Name] = v.Type
	}
	for alias, path := range EnvAliases {
		names[alias] = names[envName(path)]
	}
	for name, typ := range names {
		spellings := []string{"", " ", "\t "}
		if strings.HasPrefix(typ, "list of") {
			spellings = append(spellings, ",", " , ,")
		}
		for _, empty := range spellings {
			kv := name + "=" + empty
			c := fullConfig(t)
			if err := c.ApplyEnv([]string{kv}); err != nil {
				t.Errorf("%q: %v", kv, err)
				continue
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("%q changed the configuration", kv)
			}
			if r := ReadEnvReport([]string{kv}); !slices.Equal(r.Ignored, []string{name}) || len(r.Set) != 0 {
				t.Errorf("%q reported as %+v, want ignored", kv, r)
			}
		}
	}
}

// TestLoadEmptyEnvKeepsProtections: a file's protections (the admin client
// CA, the metrics and admin token files, the proxy preset, TLS, audit and
// token-service limits) survive every KEYGATE_ variable given empty at
// once, through Load; a non-empty one still overrides.
func TestLoadEmptyEnvKeepsProtections(t *testing.T) {
	body := "admin_listen: 127.0.0.1:9090\nmetrics_token_file: /run/metrics.token\nadmin_hosts: [admin.example]\n" +
		"forward_auth: {proxy: nginx}\n" +
		"tls: {cert_file: /tls/c.pem, key_file: /tls/k.pem}\n" +
		"admin_tls: {cert_file: /tls/ac.pem, key_file: /tls/ak.pem, client_ca_file: /tls/operators.pem}\n" +
		"audit: {node: n1, file: {dir: /var/audit, sync: batch}}\n" +
		"token_service: {database_url: postgres://db/kg, issuer: https://kg.example, admin_token_file: /run/admin.token, " +
		"token_rate_limit: 2, trusted_proxies: [10.0.0.0/8], redis_url: rediss://cache:6380, redis_ca_file: /tls/redis-ca.pem}\n"
	path := writeConfig(t, body)
	want, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, v := range EnvVars() {
		env = append(env, v.Name+"=")
	}
	for alias := range EnvAliases {
		env = append(env, alias+"=")
	}
	got, err := Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("empty variables changed the loaded configuration:\n got %+v\nwant %+v", got, want)
	}
	if got.AdminTLS.ClientCAFile != "/tls/operators.pem" || got.MetricsTokenFile != "/run/metrics.token" || got.ForwardAuth.Proxy != "nginx" {
		t.Errorf("a protection was cleared: %+v", got)
	}
	got, err = Load(path, []string{"KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=/tls/other.pem"})
	if err != nil || got.AdminTLS.ClientCAFile != "/tls/other.pem" {
		t.Errorf("a non-empty variable no longer overrides: %v %+v", err, got)
	}
}

// TestReadEnvReport: the variables that set a field are named as given
// (aliases too), once each, sorted; empty ones are ignored; variables of
// no field (the root key, the admin token) are not ApplyEnv's and are not
// reported.
func TestReadEnvReport(t *testing.T) {
	r := ReadEnvReport([]string{"KEYGATE_LISTEN=127.0.0.1:1", "KEYGATE_DATABASE_URL=postgres://x", "KEYGATE_ADMIN_TLS_CLIENT_CA_FILE=",
		"KEYGATE_ROOT_KEY=c2VjcmV0", "KEYGATE_ADMIN_TOKEN=", "PATH=/bin", "KEYGATE_LISTEN=127.0.0.1:2", "NOEQUALS"})
	if want := []string{"KEYGATE_DATABASE_URL", "KEYGATE_LISTEN"}; !slices.Equal(r.Set, want) {
		t.Errorf("set %v, want %v", r.Set, want)
	}
	if want := []string{"KEYGATE_ADMIN_TLS_CLIENT_CA_FILE"}; !slices.Equal(r.Ignored, want) {
		t.Errorf("ignored %v, want %v", r.Ignored, want)
	}
	// An empty rule's name leaves the alias in force.
	c := new(Config)
	if err := c.ApplyEnv([]string{"KEYGATE_TOKEN_SERVICE_DATABASE_URL=", "KEYGATE_DATABASE_URL=postgres://alias/x"}); err != nil ||
		c.TokenService.DatabaseURL != "postgres://alias/x" {
		t.Errorf("an empty rule's name cleared its alias: %q %v", c.TokenService.DatabaseURL, err)
	}
}

// FuzzApplyEnv: any value of any variable either applies or is an error
// naming the variable, never a panic; an empty one changes nothing.
func FuzzApplyEnv(f *testing.F) {
	vars := EnvVars()
	f.Add(uint16(0), "")
	f.Add(uint16(3), "  ")
	f.Add(uint16(5), " , ")
	f.Add(uint16(7), "1h30m")
	f.Add(uint16(11), "-9223372036854775808")
	f.Add(uint16(13), "NaN")
	f.Fuzz(func(t *testing.T, i uint16, value string) {
		v := vars[int(i)%len(vars)]
		c := new(Config)
		err := c.ApplyEnv([]string{v.Name + "=" + value})
		if err != nil && !strings.Contains(err.Error(), v.Name) {
			t.Errorf("%s=%q: the error does not name the variable: %v", v.Name, value, err)
		}
		if envEmpty(value, strings.HasPrefix(v.Type, "list of")) && (err != nil || !reflect.DeepEqual(c, new(Config))) {
			t.Errorf("%s=%q is empty yet changed the configuration (%v)", v.Name, value, err)
		}
	})
}
