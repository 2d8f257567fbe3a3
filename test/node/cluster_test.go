//go:build node

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

package node

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/internal/testutil/envtestutil"
	"github.com/dtq-dev/dtq/pkg/redistest"
	"github.com/dtq-dev/dtq/pkg/redistest/loopback"
)

// The node's network (docs/install.md, "A real node"). The test creates the
// bridge before anything starts: the pods' CNI network (10.213.0.0/24, the
// bridge is its gateway) and, on the same bridge, the address of the
// `kubernetes` Service (the first of 10.213.1.0/24), where kube-apiserver
// listens. There is no kube-proxy: a pod's in-cluster configuration
// (KUBERNETES_SERVICE_HOST=10.213.1.1, port 443) reaches the API server
// because that address is the host's own. Redis listens on the gateway.
const (
	bridge      = "dtqnode0"
	gatewayIP   = "10.213.0.1"
	podSubnet   = "10.213.0.0/24"
	serviceCIDR = "10.213.1.0/24"
	apiserverIP = "10.213.1.1"
	nodeName    = "dtq-node"
	// imageTag is the tag the overlay pins (test/node/overlay): with
	// :latest the kubelet would pull (imagePullPolicy Always), and this node
	// has no registry.
	imageTag   = "node"
	pauseImage = "localhost/dtq-pause:3.10"
)

// cluster is a control plane and one real node: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and the kubelet, in a
// scratch directory the test removes with everything the node left.
type cluster struct {
	dir        string
	root       string // the repository
	nodeBin    string // hack/node-assets.sh's folder
	ctlBin     string // envtest's kube-apiserver, etcd, kubectl
	kubeconfig string
	cfg        *rest.Config
	c          client.Client
	redis      *redistest.Server
	procs      map[string]*exec.Cmd
	order      []string
	sock       string // containerd's socket
	pki        *pki
	// shimSockets are the shim sockets (/run/containerd/s) that were there
	// before containerd started; teardown removes the others.
	shimSockets map[string]bool
	chaosReady  bool // the chaos Queue of the fault scenarios exists
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the real-node test needs root (a kubelet, containerd and a bridge); run it as root")
	}
	root := envtestutil.RepoRoot()
	cl := &cluster{root: root, ctlBin: envtestutil.AssetsDir(), procs: map[string]*exec.Cmd{}}
	cl.nodeBin = os.Getenv("DTQ_NODE_ASSETS")
	if cl.nodeBin == "" {
		out, err := exec.Command(filepath.Join(root, "hack", "node-assets.sh")).Output()
		if err != nil {
			t.Fatalf("hack/node-assets.sh: %v", err)
		}
		cl.nodeBin = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-controller-manager", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(cl.nodeBin, b)); err != nil {
			t.Fatalf("node part %s missing (run make node): %v", b, err)
		}
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(cl.ctlBin, b)); err != nil {
			t.Fatalf("control plane %s missing (run make envtest): %v", b, err)
		}
	}
	for _, img := range []string{"dtq-manager", "dtq-worker", "dtq-api"} {
		if _, err := os.Stat(filepath.Join(root, "bin", "images", img, "index.json")); err != nil {
			t.Fatalf("image %s missing (run make images): %v", img, err)
		}
	}
	removeStale()
	var err error
	cl.dir, err = os.MkdirTemp("", "dtq-node-")
	must(t, err)
	t.Cleanup(func() { cl.teardown(t) })
	cl.sock = filepath.Join(cl.dir, "containerd", "containerd.sock")

	removeBridge()
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"addr", "add", gatewayIP + "/24", "dev", bridge},
		{"addr", "add", apiserverIP + "/32", "dev", bridge},
		{"link", "set", bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	cl.redis = redistest.Start(t, redistest.WithArgs("--bind", "127.0.0.1", gatewayIP))

	cl.pki = newPKI(t, filepath.Join(cl.dir, "pki"), []net.IP{net.ParseIP(apiserverIP), net.ParseIP("127.0.0.1")})
	cl.startControlPlane(t, cl.pki)
	cl.startContainerd(t)
	cl.startKubelet(t, cl.pki)
	return cl
}

func (cl *cluster) startControlPlane(t *testing.T, p *pki) {
	t.Helper()
	etcdPort, peerPort := freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + etcdPort
	cl.start(t, "etcd", filepath.Join(cl.ctlBin, "etcd"),
		"--data-dir", filepath.Join(cl.dir, "etcd"), "--name", "dtq-node",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+peerPort, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peerPort,
		"--initial-cluster", "dtq-node=http://127.0.0.1:"+peerPort, "--unsafe-no-fsync")
	cl.start(t, "kube-apiserver", filepath.Join(cl.ctlBin, "kube-apiserver"),
		"--etcd-servers", etcdURL,
		"--bind-address", apiserverIP, "--secure-port", "443", "--advertise-address", apiserverIP,
		"--endpoint-reconciler-type", "none",
		"--cert-dir", filepath.Join(cl.dir, "apiserver"),
		"--tls-cert-file", p.serverCert, "--tls-private-key-file", p.serverKey, "--client-ca-file", p.ca,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		// The API server's own audience only, as on any cluster: the dtq
		// API's TokenReview asks for its audience, dtq-api, itself.
		"--api-audiences", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.saPub, "--service-account-signing-key-file", p.saKey,
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "Node,RBAC", "--allow-privileged",
		"--kubelet-client-certificate", p.adminCert, "--kubelet-client-key", p.adminKey)

	cl.kubeconfig = filepath.Join(cl.dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["node"] = &clientcmdapi.Cluster{Server: "https://" + apiserverIP + ":443", CertificateAuthority: p.ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificate: p.adminCert, ClientKey: p.adminKey}
	kc.Contexts["node"] = &clientcmdapi.Context{Cluster: "node", AuthInfo: "admin"}
	kc.CurrentContext = "node"
	must(t, clientcmd.WriteToFile(*kc, cl.kubeconfig))
	var err error
	cl.cfg, err = clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	must(t, err)
	cl.cfg.QPS, cl.cfg.Burst = 100, 200
	cl.c, err = client.New(cl.cfg, client.Options{Scheme: devstack.NewScheme()})
	must(t, err)
	cl.waitFor(t, "kube-apiserver ready", time.Minute, func(ctx context.Context) error {
		var ns corev1.Namespace
		return cl.c.Get(ctx, client.ObjectKey{Name: "default"}, &ns)
	})

	cl.start(t, "kube-controller-manager", filepath.Join(cl.nodeBin, "kube-controller-manager"),
		"--kubeconfig", cl.kubeconfig, "--authentication-kubeconfig", cl.kubeconfig, "--authorization-kubeconfig", cl.kubeconfig,
		"--leader-elect=false", "--secure-port", "0",
		"--service-account-private-key-file", p.saKey, "--root-ca-file", p.ca,
		"--use-service-account-credentials=false", "--controllers", "*")
	cl.start(t, "kube-scheduler", filepath.Join(cl.nodeBin, "kube-scheduler"),
		"--kubeconfig", cl.kubeconfig, "--authentication-kubeconfig", cl.kubeconfig, "--authorization-kubeconfig", cl.kubeconfig,
		"--leader-elect=false", "--secure-port", "0")
}

// containerdConfig is containerd 2's configuration (version 3). The machine
// lacks CAP_SYS_RESOURCE: without restrict_oom_score_adj runc fails every
// sandbox ("can't get final child's PID from pipe").
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = %[4]q
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = %[5]q

[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[6]q

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
`

// cniConfig is the pods' bridge network; its IPAM state lives in the scratch
// directory.
const cniConfig = `{"cniVersion": "1.0.0", "name": "dtq-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}`

func (cl *cluster) startContainerd(t *testing.T) {
	t.Helper()
	dir := filepath.Join(cl.dir, "containerd")
	cniDir := filepath.Join(cl.dir, "cni")
	must(t, os.MkdirAll(dir, 0o700))
	must(t, os.MkdirAll(cniDir, 0o755))
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal("runc not found (run make node: it installs Debian's runc)")
	}
	must(t, os.WriteFile(filepath.Join(cniDir, "10-dtq-node.conflist"),
		fmt.Appendf(nil, cniConfig, bridge, podSubnet, gatewayIP, filepath.Join(cl.dir, "cni-ipam")), 0o644))
	conf := filepath.Join(dir, "config.toml")
	must(t, os.WriteFile(conf, fmt.Appendf(nil, containerdConfig,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), cl.sock, runc, cniDir, pauseImage), 0o644))
	cl.shimSockets = shimSockets()
	cl.start(t, "containerd", filepath.Join(cl.nodeBin, "containerd"), "--config", conf)
	cl.waitFor(t, "containerd", 30*time.Second, func(ctx context.Context) error {
		_, err := cl.ctr(ctx, "version")
		return err
	})
	ctx := t.Context()
	if out, err := cl.ctr(ctx, "images", "import", filepath.Join(cl.nodeBin, "pause.tar")); err != nil {
		t.Fatalf("import the pause image: %v: %s", err, out)
	}
	for _, name := range []string{"dtq-manager", "dtq-worker", "dtq-api"} {
		archive := filepath.Join(cl.dir, name+".tar")
		ref := "ghcr.io/dtq-dev/" + name + ":" + imageTag
		must(t, layoutToArchive(filepath.Join(cl.root, "bin", "images", name), ref, archive))
		if out, err := cl.ctr(ctx, "images", "import", archive); err != nil {
			t.Fatalf("import %s: %v: %s", ref, err, out)
		}
	}
}

// ctr runs containerd's ctr in the k8s.io namespace (the CRI's).
func (cl *cluster) ctr(ctx context.Context, args ...string) ([]byte, error) {
	args = append([]string{"--address", cl.sock, "-n", "k8s.io"}, args...)
	return exec.CommandContext(ctx, filepath.Join(cl.nodeBin, "ctr"), args...).CombinedOutput()
}

// kubeletConfig: cgroup v1 needs failCgroupV1 false (Kubernetes 1.35+); the
// cgroupfs driver (no systemd here); image garbage collection off so the
// imported images stay; disk eviction off (the kubelet cannot read the
// disk's stats here).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[1]s
address: %[6]s
port: %[2]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
podLogsDir: %[3]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[4]s}
authorization: {mode: AlwaysAllow}
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi}
localStorageCapacityIsolation: false
serializeImagePulls: false
resolvConf: /etc/resolv.conf
volumePluginDir: %[5]s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
`

func (cl *cluster) startKubelet(t *testing.T, p *pki) {
	t.Helper()
	dir := filepath.Join(cl.dir, "kubelet")
	must(t, os.MkdirAll(dir, 0o700))
	conf := filepath.Join(dir, "config.yaml")
	must(t, os.WriteFile(conf, fmt.Appendf(nil, kubeletConfig, cl.sock, freePort(t), filepath.Join(cl.dir, "pod-logs"), p.ca, filepath.Join(dir, "plugins"), gatewayIP), 0o644))
	cl.start(t, "kubelet", filepath.Join(cl.nodeBin, "kubelet"),
		"--config", conf, "--kubeconfig", cl.kubeconfig, "--root-dir", filepath.Join(dir, "root"),
		"--cert-dir", filepath.Join(dir, "pki"),
		"--hostname-override", nodeName, "--node-ip", gatewayIP)
	cl.waitFor(t, "node "+nodeName+" Ready", 3*time.Minute, func(ctx context.Context) error {
		var n corev1.Node
		if err := cl.c.Get(ctx, client.ObjectKey{Name: nodeName}, &n); err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready %s: %s", c.Status, c.Message)
			}
		}
		return fmt.Errorf("no Ready condition")
	})
}

// start runs a component with its output in logs/<name>.log. The kernel kills
// it if the test process dies (Pdeathsig).
func (cl *cluster) start(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(cl.dir, "logs"), 0o755))
	f, err := os.Create(filepath.Join(cl.dir, "logs", name+".log"))
	must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// containerd finds its v2 shim first on PATH, before any other.
	cmd.Env = append(os.Environ(), "PATH="+cl.nodeBin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // Pdeathsig follows the thread that started the process
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	_ = f.Close()
	cl.procs[name] = cmd
	cl.order = append(cl.order, name)
}

// stop ends a component: SIGTERM, then SIGKILL after grace.
func (cl *cluster) stop(name string, grace time.Duration) {
	cmd := cl.procs[name]
	if cmd == nil || cmd.Process == nil {
		return
	}
	delete(cl.procs, name)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// teardown stops everything and undoes what the node left on the host: the
// pods' processes and cgroups, the shims, mounts (container root
// filesystems, volumes, network namespaces), the bridge and the scratch
// directory. On failure it first logs the tail of every component's log.
func (cl *cluster) teardown(t *testing.T) {
	if t.Failed() {
		for _, name := range cl.order {
			t.Logf("---- %s log (last lines) ----\n%s", name, tail(filepath.Join(cl.dir, "logs", name+".log"), 40))
		}
		_ = filepath.WalkDir(filepath.Join(cl.dir, "pod-logs"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Logf("---- container log %s (last lines) ----\n%s", strings.TrimPrefix(p, cl.dir+"/pod-logs/"), tail(p, 15))
			}
			return nil
		})
	}
	for _, name := range []string{"kubelet", "kube-scheduler", "kube-controller-manager"} {
		cl.stop(name, 5*time.Second)
	}
	killCgroups()
	cl.stop("containerd", 5*time.Second)
	killUnder(cl.dir) // the shims (started with -address <dir>/containerd/...)
	killCgroups()
	cl.stop("kube-apiserver", 5*time.Second)
	cl.stop("etcd", 5*time.Second)
	unmountAll(cl.dir)
	for s := range shimSockets() {
		if !cl.shimSockets[s] {
			_ = os.Remove(s)
		}
	}
	removeCgroups()
	removeBridge()
	if err := os.RemoveAll(cl.dir); err != nil {
		t.Errorf("remove %s: %v", cl.dir, err)
	}
	if left := mountsUnder(cl.dir); len(left) > 0 {
		t.Errorf("mounts left after teardown: %v", left)
	}
}

// removeStale undoes what an earlier run killed before its teardown left
// (the node's processes die with the test process, its pods, mounts and
// bridge do not): one node runs on a machine at a time.
func removeStale() {
	stale, _ := filepath.Glob(filepath.Join(os.TempDir(), "dtq-node-*"))
	for _, d := range stale {
		killUnder(d)
	}
	killCgroups()
	for _, d := range stale {
		unmountAll(d)
		_ = os.RemoveAll(d)
	}
	removeCgroups()
	removeBridge()
	// Shim sockets no process serves any more.
	live, _ := os.ReadFile("/proc/net/unix")
	for s := range shimSockets() {
		if !strings.Contains(string(live), s) {
			_ = os.Remove(s)
		}
	}
}

// cgroupRoots are the kubelet's pod cgroups (cgroupfs driver, cgroup root /)
// in every hierarchy.
func cgroupRoots() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	return roots
}

// killCgroups SIGKILLs every process in the pod cgroups.
func killCgroups() {
	for range 20 {
		n := 0
		for _, r := range cgroupRoots() {
			_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
				if err != nil {
					return nil //nolint:nilerr // a cgroup removed meanwhile: walk on
				}
				if d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						n++
					}
				}
				return nil
			})
		}
		if n == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeCgroups removes the pod cgroups, deepest first.
func removeCgroups() {
	for _, r := range cgroupRoots() {
		var dirs []string
		_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

// killUnder SIGKILLs the processes whose command line names dir.
func killUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(200 * time.Millisecond)
}

// mountsUnder lists the mount points under dir and the pods' network
// namespaces (/run/netns/cni-*, which containerd's CRI creates), deepest
// last.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		if strings.HasPrefix(mp, dir+"/") || strings.HasPrefix(mp, "/run/netns/cni-") || strings.HasPrefix(mp, "/var/run/netns/cni-") {
			out = append(out, mp)
		}
	}
	return out
}

// unmountAll detaches every mount mountsUnder lists, deepest first, and
// removes the network namespace files.
func unmountAll(dir string) {
	for range 3 {
		mps := mountsUnder(dir)
		if len(mps) == 0 {
			break
		}
		slices.Reverse(mps)
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	netns, _ := filepath.Glob("/run/netns/cni-*")
	for _, p := range netns {
		_ = os.Remove(p)
	}
}

// shimSockets lists the sockets of containerd's shims: containerd 2 puts them
// under /run/containerd/s whatever its state directory.
func shimSockets() map[string]bool {
	out := map[string]bool{}
	got, _ := filepath.Glob("/run/containerd/s/*")
	for _, s := range got {
		out[s] = true
	}
	return out
}

func removeBridge() {
	if _, err := net.InterfaceByName(bridge); err == nil {
		_ = exec.Command("ip", "link", "del", bridge).Run()
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := loopback.FreePort()
	must(t, err)
	return strconv.Itoa(p)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitFor polls f every 500 ms until it returns nil, failing the test with
// f's last error after timeout.
func (cl *cluster) waitFor(t *testing.T, what string, timeout time.Duration, f func(context.Context) error) {
	t.Helper()
	if err := poll(t.Context(), timeout, f); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func poll(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		got := f(cctx)
		ccancel()
		if got == nil {
			return nil
		}
		if err == nil || ctx.Err() == nil {
			err = got // not the error of a poll the deadline cut short
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", timeout, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
