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

package devstack

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// The user's kubeconfig (<dir>/kubeconfig) authenticates with a bearer token,
// not envtest's client certificate, so that the same credentials reach the
// dtq HTTP API (which accepts ServiceAccount tokens for its audience only):
// kubectl uses it as is, kubectl dtq requests tokens for the API's audience
// with it (TokenRequest for its own ServiceAccount), curl users mint one
// with `kubectl create token dtq-dev-admin --audience dtq-api`. The token is
// the ServiceAccount AdminServiceAccount's, bound to cluster-admin and minted
// with the TokenRequest API at every start.
// The stack's own processes (manager, API) use the client-certificate
// kubeconfig <dir>/admin.kubeconfig.

// AdminNamespace and AdminServiceAccount name the dev stack's admin identity.
const (
	AdminNamespace      = "dtq-system"
	AdminServiceAccount = "dtq-dev-admin"
)

// adminTokenTTL is the lifetime asked of the admin token; the dev stack is
// restarted long before.
const adminTokenTTL = 30 * 24 * time.Hour

// writeTokenKubeconfig creates the admin ServiceAccount and its binding (if
// missing), mints a token and writes path: the cluster of s.Config with that
// token as its user.
func (s *Stack) writeTokenKubeconfig(ctx context.Context, path string) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: AdminNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: AdminServiceAccount, Namespace: AdminNamespace}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: AdminServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: AdminServiceAccount, Namespace: AdminNamespace}},
		},
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	token, err := s.Token(ctx, AdminNamespace, AdminServiceAccount, adminTokenTTL)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dtq-dev"] = &clientcmdapi.Cluster{Server: s.Config.Host, CertificateAuthorityData: s.Config.CAData}
	cfg.AuthInfos[AdminServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["dtq-dev"] = &clientcmdapi.Context{Cluster: "dtq-dev", AuthInfo: AdminServiceAccount, Namespace: "default"}
	cfg.CurrentContext = "dtq-dev"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// Token mints a token of ServiceAccount namespace/name with the TokenRequest
// API (what `kubectl create token` does), valid for ttl, for audiences (none:
// the Kubernetes API server's own, which the HTTP API refuses).
func (s *Stack) Token(ctx context.Context, namespace, name string, ttl time.Duration, audiences ...string) (string, error) {
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return "", err
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: audiences, ExpirationSeconds: ptr.To(int64(ttl.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("mint a token of %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// APIToken mints a token of ServiceAccount namespace/name for the HTTP API's
// audience (dtq-api), as `kubectl create token NAME --audience dtq-api` does.
func (s *Stack) APIToken(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	return s.Token(ctx, namespace, name, ttl, dtqclient.DefaultAudience)
}
