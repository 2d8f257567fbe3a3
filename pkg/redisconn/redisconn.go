/*
Copyright 2026 The dtq Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package redisconn is the one way every dtq binary (manager, workers, API,
// CLI) reaches Redis: a URL plus optional credentials and CA bundle that may
// come from separate environment variables, so a password can live in a Secret
// instead of inside a URL in a pod spec.
//
// The URL's scheme names the topology (docs/redis.md has the table):
//
//	redis://[user:pass@]host:port[/db]                      one node (rediss:// for TLS)
//	redis+cluster://[user:pass@]host:port[?addr=host:port]  Redis Cluster seed nodes (rediss+cluster://)
//	redis+sentinel://[suser:spass@]host:port[/db]?master_name=m[&addr=host:port][&username=u&password=p]
//	                                                        Sentinel (rediss+sentinel://)
//
// After the scheme's "+cluster" or "+sentinel" is dropped, the rest is
// go-redis's ParseURL, ParseClusterURL or ParseFailoverURL form, with its
// query options. In the Sentinel form the user info authenticates to the
// sentinels and username/password in the query to the data nodes, as in
// ParseFailoverURL. Config's Username, Password (or PasswordFile) and CAFile
// apply to the data nodes of every topology (a CA bundle to the sentinels too).
package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by FromEnv. They are the contract between the
// operator (which injects them into worker pods) and every binary.
const (
	EnvURL          = "DTQ_REDIS_URL"           // required: redis://, rediss://, redis+cluster://, redis+sentinel:// ...
	EnvUsername     = "DTQ_REDIS_USERNAME"      // ACL user of the data nodes; overrides the URL's
	EnvPassword     = "DTQ_REDIS_PASSWORD"      // overrides the URL's
	EnvPasswordFile = "DTQ_REDIS_PASSWORD_FILE" // a file holding the password (a mounted Secret)
	EnvCAFile       = "DTQ_REDIS_CA_FILE"       // PEM CA bundle for a TLS scheme (else the system roots)
)

// Topology is the kind of Redis deployment a URL names.
type Topology string

// Topologies, by URL scheme.
const (
	Single   Topology = "single"   // redis://, rediss://
	Cluster  Topology = "cluster"  // redis+cluster://, rediss+cluster://
	Sentinel Topology = "sentinel" // redis+sentinel://, rediss+sentinel://
)

// Config says how to reach Redis. Username, Password and CAFile, when set,
// override what the URL says.
type Config struct {
	URL      string
	Username string
	Password string
	// PasswordFile is read by Client when Password is empty.
	PasswordFile string
	CAFile       string
	// PoolSize, when larger than the client's default (the URL's pool_size,
	// else 10 per CPU), raises it. On a cluster it is per node.
	PoolSize int
}

// FromEnv reads the DTQ_REDIS_* variables (see the Env* constants).
func FromEnv() Config {
	return Config{
		URL:          os.Getenv(EnvURL),
		Username:     os.Getenv(EnvUsername),
		Password:     os.Getenv(EnvPassword),
		PasswordFile: os.Getenv(EnvPasswordFile),
		CAFile:       os.Getenv(EnvCAFile),
	}
}

// Topology returns the topology the URL's scheme names.
func (c Config) Topology() (Topology, error) {
	top, _, err := splitScheme(c.URL)
	return top, err
}

// splitScheme returns the topology of u and u with the scheme go-redis parses
// (redis or rediss).
func splitScheme(u string) (Topology, string, error) {
	scheme, rest, ok := strings.Cut(u, "://")
	base, kind, _ := strings.Cut(scheme, "+")
	if !ok || (base != "redis" && base != "rediss") {
		return "", "", fmt.Errorf("redisconn: %s: want a redis://, rediss://, redis+cluster:// or redis+sentinel:// URL", redact(u))
	}
	plain := base + "://" + rest
	switch kind {
	case "":
		return Single, plain, nil
	case "cluster":
		return Cluster, plain, nil
	case "sentinel":
		return Sentinel, plain, nil
	}
	return "", "", fmt.Errorf("redisconn: %s: unknown topology %q (want +cluster or +sentinel)", redact(u), kind)
}

// Client builds a client for c: a *redis.Client for one node or Sentinel
// (which follows the master the sentinels name), a *redis.ClusterClient for a
// cluster. It does not connect.
func (c Config) Client() (redis.UniversalClient, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("redisconn: no Redis URL (set %s)", EnvURL)
	}
	top, plain, err := splitScheme(c.URL)
	if err != nil {
		return nil, err
	}
	password, err := c.password()
	if err != nil {
		return nil, err
	}
	creds := func(user, pass *string) {
		if c.Username != "" {
			*user = c.Username
		}
		if password != "" {
			*pass = password
		}
	}
	wrap := func(err error) error { return fmt.Errorf("redisconn: %s: %w", redact(c.URL), err) }
	// The parsers' errors may quote the URL (url.Parse) or a piece of it.
	parseFailed := func(err error) error {
		if holdsSecret(c.URL) {
			err = errors.New("the URL does not parse (percent-encode @ : / ? # & in a user name or password)")
		}
		return wrap(err)
	}
	switch top {
	case Cluster:
		opt, err := redis.ParseClusterURL(plain)
		if err != nil {
			return nil, parseFailed(err)
		}
		if u, _ := url.Parse(plain); u != nil && strings.Trim(u.Path, "/") != "" && strings.Trim(u.Path, "/") != "0" {
			return nil, wrap(errors.New("a cluster has only database 0"))
		}
		creds(&opt.Username, &opt.Password)
		if opt.TLSConfig, err = c.tlsConfig(opt.TLSConfig, false); err != nil {
			return nil, err
		}
		opt.PoolSize = c.poolSize(opt.PoolSize)
		return redis.NewClusterClient(opt), nil
	case Sentinel:
		opt, err := redis.ParseFailoverURL(plain)
		if err != nil {
			return nil, parseFailed(err)
		}
		if opt.MasterName == "" {
			return nil, wrap(errors.New("a Sentinel URL needs master_name=<name>"))
		}
		creds(&opt.Username, &opt.Password)
		if opt.TLSConfig, err = c.tlsConfig(opt.TLSConfig, false); err != nil {
			return nil, err
		}
		opt.PoolSize = c.poolSize(opt.PoolSize)
		return redis.NewFailoverClient(opt), nil
	default:
		opt, err := redis.ParseURL(plain)
		if err != nil {
			return nil, parseFailed(err)
		}
		creds(&opt.Username, &opt.Password)
		if opt.TLSConfig, err = c.tlsConfig(opt.TLSConfig, true); err != nil {
			return nil, err
		}
		opt.PoolSize = c.poolSize(opt.PoolSize)
		return redis.NewClient(opt), nil
	}
}

func (c Config) password() (string, error) {
	if c.Password != "" || c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("redisconn: read password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// tlsConfig returns the TLS config of the parsed URL (nil without TLS) with
// the CA bundle as its only roots. go-redis names the URL's first host as the
// server name; one node keeps it, but the nodes of a cluster or behind
// Sentinel are other hosts, so there each connection checks the certificate
// against the address it dials (keepName false).
func (c Config) tlsConfig(parsed *tls.Config, keepName bool) (*tls.Config, error) {
	if parsed == nil {
		if c.CAFile != "" {
			return nil, errors.New("redisconn: a CA file needs a TLS URL (rediss://, rediss+cluster:// or rediss+sentinel://)")
		}
		return nil, nil
	}
	cfg := parsed.Clone()
	if !keepName {
		cfg.ServerName = ""
	}
	cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
	if c.CAFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("redisconn: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("redisconn: %s holds no PEM certificate", c.CAFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// poolSize is the URL's pool size (0: go-redis's default of 10 per CPU),
// raised to c.PoolSize when that is larger.
func (c Config) poolSize(fromURL int) int {
	if fromURL == 0 {
		fromURL = 10 * runtime.GOMAXPROCS(0)
	}
	return max(fromURL, c.PoolSize)
}

// holdsSecret reports whether a URL may hold a password: user info or a
// password query option.
func holdsSecret(u string) bool { return strings.Contains(u, "@") || strings.Contains(u, "password") }

// passwordOption is a query option whose name ends in "password", with its
// value up to the next "&".
var passwordOption = regexp.MustCompile(`([?&][a-z_]*password)=[^&]*`)

// redact hides the passwords of a URL (user info and the password query
// options) for error messages. url.Parse ends the user info at the last "@"
// of the host part; a password with an unescaped "/", "?" or "#" ends that
// part early and lands in the path or the query. So everything before the
// last "@" is hidden but the user name (all of it when there is no ":"),
// after the query's password values, which may hold an "@", are hidden.
func redact(u string) string {
	prefix, rest := "", u
	if scheme, after, ok := strings.Cut(u, "://"); ok {
		prefix, rest = scheme+"://", after
	}
	rest = passwordOption.ReplaceAllString(rest, "${1}=xxxxx")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, _, hasPass := strings.Cut(rest[:at], ":")
		if !hasPass || strings.ContainsAny(user, "/?#&") {
			user = "xxxxx"
		} else {
			user += ":xxxxx"
		}
		rest = user + rest[at:]
	}
	return prefix + rest
}
