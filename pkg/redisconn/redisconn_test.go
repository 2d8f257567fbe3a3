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

package redisconn_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dtq-dev/dtq/pkg/redisconn"
	"github.com/dtq-dev/dtq/pkg/redistest"
)

// The credentials from the variables override the URL's, and a password file
// works like a password.
func TestClientCredentials(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "app", "on", ">s3cret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "redis://nobody:wrong@" + srv.Addr + "/0"
	for name, tc := range map[string]struct {
		cfg  redisconn.Config
		user string // ACL WHOAMI; "" when the connection must be refused
	}{
		"url credentials":         {cfg: redisconn.Config{URL: url}},
		"username and password":   {cfg: redisconn.Config{URL: url, Username: "app", Password: "s3cret"}, user: "app"},
		"password file":           {cfg: redisconn.Config{URL: url, Username: "app", PasswordFile: file}, user: "app"},
		"password wins over file": {cfg: redisconn.Config{URL: url, Username: "app", Password: "wrong", PasswordFile: file}},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := tc.cfg.Client()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, err := c.Do(t.Context(), "ACL", "WHOAMI").Text()
			if tc.user == "" {
				if err == nil {
					t.Fatalf("connected as %q, want a refusal", got)
				}
				return
			}
			if err != nil || got != tc.user {
				t.Fatalf("ACL WHOAMI = %q, %v; want %q", got, err, tc.user)
			}
		})
	}
}

func TestClientErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  redisconn.Config
		want string
	}{
		"no url":         {redisconn.Config{}, "DTQ_REDIS_URL"},
		"bad scheme":     {redisconn.Config{URL: "http://u:hunter2@h:1"}, "u:xxxxx@h:1"},
		"ca without tls": {redisconn.Config{URL: "redis://h:1", CAFile: "/nonexistent"}, "rediss://"},
		"missing ca":     {redisconn.Config{URL: "rediss://h:1", CAFile: "/nonexistent"}, "CA file"},
		"missing pwfile": {redisconn.Config{URL: "redis://h:1", PasswordFile: "/nonexistent"}, "password file"},
		"unknown kind":   {redisconn.Config{URL: "redis+ring://u:hunter2@h:1"}, "unknown topology"},
		"cluster db":     {redisconn.Config{URL: "redis+cluster://h:1/3"}, "database 0"},
		"cluster ca":     {redisconn.Config{URL: "redis+cluster://h:1", CAFile: "/nonexistent"}, "rediss+cluster://"},
		"no master name": {redisconn.Config{URL: "redis+sentinel://h:1?username=u&password=hunter2"}, "master_name"},
		"bad option":     {redisconn.Config{URL: "redis+sentinel://h:1?master_name=m&password=hunter2&nope=1"}, "password=xxxxx"},
		// url.Parse's own error quotes the whole URL.
		"unparsable":        {redisconn.Config{URL: "redis://u:hunter2%zz@h:1"}, "does not parse"},
		"unparsable port":   {redisconn.Config{URL: "redis://u:x/hunter2@h:1"}, "u:xxxxx@h:1"},
		"slash in password": {redisconn.Config{URL: "redis://u:/hunter2@h:1"}, "does not parse"},
		"at in password":    {redisconn.Config{URL: "redis://u:p@hunter2@h:1/notadb"}, "u:xxxxx@h:1/notadb"},
		"at, no user":       {redisconn.Config{URL: "redis+cluster://p@hunter2@h:1/3"}, "xxxxx@h:1/3"},
		"at in query":       {redisconn.Config{URL: "redis+sentinel://h:1?sentinel_password=hunter2@x&nope=1"}, "sentinel_password=xxxxx"},
		"no scheme":         {redisconn.Config{URL: "u:hunter2@h:1"}, "u:xxxxx@h:1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := tc.cfg.Client()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("err = %v, want it to mention %q and no password", err, tc.want)
			}
		})
	}
}
