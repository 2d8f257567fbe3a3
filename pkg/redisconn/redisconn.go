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
package redisconn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by FromEnv. They are the contract between the
// operator (which injects them into worker pods) and every binary.
const (
	EnvURL          = "DTQ_REDIS_URL"           // required: redis://, rediss://
	EnvUsername     = "DTQ_REDIS_USERNAME"      // ACL user; overrides the URL's
	EnvPassword     = "DTQ_REDIS_PASSWORD"      // overrides the URL's
	EnvPasswordFile = "DTQ_REDIS_PASSWORD_FILE" // a file holding the password (a mounted Secret)
	EnvCAFile       = "DTQ_REDIS_CA_FILE"       // PEM CA bundle for rediss:// (else the system roots)
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
	// PoolSize, when larger than the client's default, raises it.
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

// Client builds a client for c. It does not connect.
func (c Config) Client() (redis.UniversalClient, error) {
	if c.URL == "" {
		return nil, fmt.Errorf("redisconn: no Redis URL (set %s)", EnvURL)
	}
	opt, err := redis.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("redisconn: %s: %w", redact(c.URL), err)
	}
	password := c.Password
	if password == "" && c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("redisconn: read password file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	if c.Username != "" {
		opt.Username = c.Username
	}
	if password != "" {
		opt.Password = password
	}
	if c.CAFile != "" {
		if opt.TLSConfig == nil {
			return nil, errors.New("redisconn: a CA file needs a rediss:// URL")
		}
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("redisconn: read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("redisconn: %s holds no PEM certificate", c.CAFile)
		}
		opt.TLSConfig = &tls.Config{RootCAs: pool, ServerName: opt.TLSConfig.ServerName, MinVersion: tls.VersionTLS12}
	}
	if c.PoolSize > opt.PoolSize {
		opt.PoolSize = c.PoolSize
	}
	return redis.NewClient(opt), nil
}

// redact hides the password of a URL for error messages.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return u
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return u
}
