//! A user's session with capictl on the Docker Engine: the embedded management cluster in a
//! state directory of its own, the CLI and kubectl against it, and one cluster's containers
//! removed afterwards whatever happened — for the Docker provider's test and benchmark.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Waits until `check` passes, and says how long it took; on timeout, what it last saw and
/// the cluster's tree.
pub async fn wait(
    s: &Session,
    what: &str,
    seconds: u64,
    mut check: impl FnMut() -> Result<(), String>,
) {
    let started = Instant::now();
    loop {
        match check() {
            Ok(()) => {
                eprintln!("{what}: {:.1?}", started.elapsed());
                return;
            }
            Err(last) if started.elapsed() > Duration::from_secs(seconds) => {
                let tree = s.run(
                    capictl_binary(),
                    &[
                        "describe",
                        "cluster",
                        &s.cluster,
                        "--show-conditions",
                        "all",
                    ],
                );
                // The nodes' own story: each container's last log lines (the agent, kubeadm
                // and the static pods all write there).
                let mut logs = String::new();
                for c in s.session_containers() {
                    let out = Command::new("docker")
                        .args(["logs", "--tail", "25", &c])
                        .output()
                        .unwrap();
                    logs.push_str(&format!(
                        "\n--- docker logs {c} (last 25 lines)\n{}{}",
                        text(&out.stdout),
                        text(&out.stderr)
                    ));
                }
                panic!(
                    "timed out after {seconds}s waiting until {what}; last: {last}\n{}{}{logs}",
                    text(&tree.stdout),
                    text(&tree.stderr)
                );
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn capictl_binary() -> &'static str {
    env!("CARGO_BIN_EXE_capictl")
}

pub fn kubectl_binary() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// One user's session: a state directory, a kubeconfig, and the cluster's name.
pub struct Session {
    pub dir: std::path::PathBuf,
    pub kubeconfig: String,
    pub cluster: String,
}

impl Session {
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap()
    }

    pub fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?} failed:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    pub fn capictl(&self, args: &[&str]) -> String {
        self.ok(capictl_binary(), args)
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.ok(&kubectl_binary(), args)
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).unwrap()
    }

    /// The label selector of the cluster's control-plane Machines.
    pub fn control_plane_selector(&self) -> String {
        format!(
            "cluster.x-k8s.io/cluster-name={},cluster.x-k8s.io/control-plane",
            self.cluster
        )
    }

    /// Asks for a control-plane upgrade, as a user patches the KubeadmControlPlane.
    pub fn upgrade_control_plane(&self, version: &str) {
        self.kubectl(&[
            "patch",
            "kcp",
            &format!("{}-control-plane", self.cluster),
            "--type",
            "merge",
            "-p",
            &format!(r#"{{"spec":{{"version":"{version}"}}}}"#),
        ]);
    }

    /// The cluster's node and load-balancer containers (not its Pods' containers).
    pub fn node_containers(&self) -> Vec<String> {
        self.container_names(&["label=io.x-k8s.kind.role"])
    }

    /// Every container of the cluster: nodes, load balancer, and the Pods the nodes run.
    pub fn containers(&self) -> Vec<String> {
        self.container_names(&[])
    }

    /// The containers of this session's clusters: the one named after it and those named
    /// `<it>-<suffix>` (tests that make several), for what a failure shows.
    pub fn session_containers(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args([
                "ps",
                "-a",
                "--filter",
                "label=io.x-k8s.capictl.cluster",
                "--format",
                "{{.Names}}\t{{.Label \"io.x-k8s.capictl.cluster\"}}",
            ])
            .output()
            .unwrap();
        let owner = format!("default/{}", self.cluster);
        let mut names: Vec<String> = text(&out.stdout)
            .lines()
            .filter_map(|line| {
                let (name, label) = line.split_once('\t')?;
                (label == owner || label.starts_with(&format!("{owner}-")))
                    .then(|| name.to_string())
            })
            .collect();
        names.sort();
        names
    }

    fn container_names(&self, filters: &[&str]) -> Vec<String> {
        cluster_containers(&self.cluster, filters)
    }
}

/// The names of the containers of cluster `cluster` in namespace default that pass these
/// `docker ps` filters, sorted.
fn cluster_containers(cluster: &str, filters: &[&str]) -> Vec<String> {
    let owner = format!("label=io.x-k8s.capictl.cluster=default/{cluster}");
    let mut args = vec!["ps", "-a", "--filter", owner.as_str()];
    for f in filters {
        args.extend(["--filter", f]);
    }
    args.extend(["--format", "{{.Names}}"]);
    let out = Command::new("docker").args(&args).output().unwrap();
    let mut names: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    names.sort();
    names
}

impl Drop for Session {
    fn drop(&mut self) {
        // The management cluster first, whose Docker provider would make a removed load
        // balancer again; then the nodes, whose kubelets would make their Pods' containers
        // again; then the rest.
        let _ = Command::new(capictl_binary())
            .args(["management", "down", "--dir"])
            .arg(self.dir.join("management"))
            .output();
        for c in self.node_containers().into_iter().chain(self.containers()) {
            let _ = Command::new("docker").args(["rm", "-f", "-v", &c]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn machines(s: &Session, selector: &str) -> Vec<Value> {
    s.json(&["get", "machines", "-l", selector])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub fn condition(object: &Value, t: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

/// Every Machine of the selector at `version` and Ready, `count` of them; else what is not.
pub fn rolled_out(s: &Session, selector: &str, version: &str, count: usize) -> Result<(), String> {
    rolled_out_of(&machines(s, selector), version, count)
}

/// Whether these Machines are `count`, every one at `version` and Ready; else what is not.
pub fn rolled_out_of(ms: &[Value], version: &str, count: usize) -> Result<(), String> {
    let done = ms
        .iter()
        .filter(|m| {
            m["spec"]["version"] == version
                && condition(m, "Ready").as_deref() == Some("True")
                && m["metadata"]["deletionTimestamp"].is_null()
        })
        .count();
    if ms.len() == count && done == count {
        Ok(())
    } else {
        Err(format!(
            "{done} of {} Machines at {version} and Ready, {count} wanted",
            ms.len()
        ))
    }
}

impl Session {
    /// capictl's images for these versions, the embedded management cluster and the Docker
    /// provider installed on it, for a cluster named `<prefix>-<random>`.
    pub async fn start(prefix: &str, versions: &str) -> Session {
        capictl::install_crypto_provider();
        super::docker::engine().await;
        let build = Command::new(capictl_binary())
            .args(["images", "build", "--kubernetes-version", versions])
            .output()
            .unwrap();
        assert!(build.status.success(), "{}", text(&build.stderr));
        Session::up(&format!(
            "{prefix}-{}",
            capictl::apiserver::object::random_suffix()
        ))
    }

    /// Another embedded management cluster with the Docker provider, for the cluster `cluster`
    /// (one moved there, say).
    pub fn up(cluster: &str) -> Session {
        let dir = std::env::temp_dir().join(format!("capictl-quickstart-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = Session {
            kubeconfig: dir.join("kubeconfig").display().to_string(),
            cluster: cluster.to_string(),
            dir,
        };
        s.capictl(&[
            "management",
            "up",
            "--dir",
            &s.dir.join("management").display().to_string(),
        ]);
        s.capictl(&["init", "--infrastructure", "docker"]);
        s
    }

    /// `capictl generate cluster` of the development flavor, applied with kubectl.
    pub fn apply_cluster(&self, version: &str, control_planes: u32, workers: u32) {
        let manifest = self.capictl(&[
            "generate",
            "cluster",
            &self.cluster,
            "--flavor",
            "development",
            "--kubernetes-version",
            version,
            "--control-plane-machine-count",
            &control_planes.to_string(),
            "--worker-machine-count",
            &workers.to_string(),
        ]);
        let mut apply = Command::new(kubectl_binary())
            .args(["apply", "-f", "-"])
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(apply.stdin.as_mut().unwrap(), manifest.as_bytes()).unwrap();
        assert!(apply.wait_with_output().unwrap().status.success());
    }
}

/// Waits until the workload cluster (through its kubeconfig at `workload`) has `count` Nodes,
/// all Ready.
pub async fn all_nodes_ready(s: &Session, workload: &str, count: usize) {
    wait(
        s,
        &format!("{count} Ready nodes through the load balancer"),
        120,
        || {
            let out = s.run(
                &kubectl_binary(),
                &["--kubeconfig", workload, "get", "nodes", "-o", "json"],
            );
            let nodes: Value = serde_json::from_slice(&out.stdout)
                .map_err(|e| format!("{e}: {}", text(&out.stderr)))?;
            let items = nodes["items"].as_array().cloned().unwrap_or_default();
            let ready = items
                .iter()
                .filter(|n| condition(n, "Ready").as_deref() == Some("True"))
                .count();
            if items.len() == count && ready == count {
                Ok(())
            } else {
                Err(format!("{ready} of {} nodes Ready", items.len()))
            }
        },
    )
    .await;
}

impl Session {
    /// `capictl generate cluster` of this session's cluster from `source` (`["--from", FILE]`
    /// or a flavor's flags) in namespace default, applied with kubectl.
    pub fn apply_generated(
        &self,
        source: &[&str],
        version: &str,
        control_planes: u32,
        workers: u32,
    ) {
        let (control_planes, workers) = (control_planes.to_string(), workers.to_string());
        let mut args = vec!["generate", "cluster", self.cluster.as_str()];
        args.extend(source);
        args.extend([
            "--kubernetes-version",
            version,
            "--control-plane-machine-count",
            &control_planes,
            "--worker-machine-count",
            &workers,
            "--target-namespace",
            "default",
        ]);
        let file = self.dir.join("cluster.yaml");
        std::fs::write(&file, self.capictl(&args)).unwrap();
        self.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    }

    /// Waits until the Cluster is Available, showing its conditions while it is not.
    pub async fn wait_available(&self, seconds: u64) {
        wait(self, "the Cluster Available", seconds, || {
            let c = self.json(&["get", "cluster", &self.cluster]);
            match condition(&c, "Available").as_deref() {
                Some("True") => Ok(()),
                other => Err(format!(
                    "Available {other:?}; {}",
                    self.capictl(&[
                        "describe",
                        "cluster",
                        &self.cluster,
                        "--show-conditions",
                        "Cluster"
                    ])
                )),
            }
        })
        .await;
    }
}

/// capictl's workload image on this host (`capictl images build` makes it).
pub fn busybox_image() -> String {
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap();
    let release = capictl::providers::docker::images::host_release(&os_release).unwrap();
    capictl::providers::docker::images::busybox_image(&release)
}

/// A workload cluster reached through its kubeconfig, with kubectl.
pub struct Workload<'a> {
    pub session: &'a Session,
    pub kubeconfig: String,
}

impl Workload<'_> {
    /// `kubectl apply -f -` of a manifest.
    pub fn apply(&self, manifest: &str) {
        use std::io::Write;
        let mut apply = Command::new(kubectl_binary())
            .args(["--kubeconfig", self.kubeconfig.as_str(), "apply", "-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        apply
            .stdin
            .take()
            .unwrap()
            .write_all(manifest.as_bytes())
            .unwrap();
        let out = apply.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut all = vec!["--kubeconfig", self.kubeconfig.as_str()];
        all.extend(args);
        self.session.ok(&kubectl_binary(), &all)
    }

    pub fn json(&self, args: &[&str]) -> Value {
        self.try_json(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// kubectl's JSON, or what went wrong: for polls that outlast a moment when the cluster's
    /// API server does not answer (its control plane being replaced, say).
    pub fn try_json(&self, args: &[&str]) -> Result<Value, String> {
        let mut all = vec!["--kubeconfig", self.kubeconfig.as_str()];
        all.extend(args);
        all.extend(["-o", "json"]);
        let out = self.session.run(&kubectl_binary(), &all);
        if !out.status.success() {
            return Err(format!("kubectl {all:?} failed: {}", text(&out.stderr)));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("kubectl {all:?}: {e}"))
    }

    /// The Pods of a selector that run and are Ready: (name, node, Pod IP).
    pub fn running(&self, selector: &str) -> Vec<(String, String, String)> {
        let pods = self.json(&["get", "pods", "-l", selector]);
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["phase"] == "Running"
                    && condition(p, "Ready").as_deref() == Some("True")
            })
            .map(|p| {
                let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
                (
                    field(&p["metadata"]["name"]),
                    field(&p["spec"]["nodeName"]),
                    field(&p["status"]["podIP"]),
                )
            })
            .collect()
    }

    /// The first container state of a Pod as kubelet reports it: (state, reason).
    pub fn state(&self, pod: &str) -> (String, String) {
        let p = self.json(&["get", "pod", pod]);
        let state = &p["status"]["containerStatuses"][0]["state"];
        match state.as_object().and_then(|o| o.iter().next()) {
            Some((kind, detail)) => (
                kind.clone(),
                detail["reason"].as_str().unwrap_or_default().to_string(),
            ),
            None => (String::new(), String::new()),
        }
    }
}

/// What `wget` in the named container of a Pod fetches from a URL (its Docker container, found
/// by the labels kubelet puts on it).
pub fn fetch_from_pod(pod: &str, container: &str, url: &str) -> Result<String, String> {
    let out = Command::new("docker")
        .args([
            "ps",
            "-q",
            "--filter",
            &format!("label=io.kubernetes.pod.name={pod}"),
            "--filter",
            &format!("label=io.kubernetes.container.name={container}"),
        ])
        .output()
        .unwrap();
    let id = text(&out.stdout);
    let id = id
        .lines()
        .next()
        .ok_or(format!("no running container of {pod}"))?;
    // busybox wget's -T (timeout) crashes Debian's static build; the Pods answer at once.
    let out = Command::new("docker")
        .args(["exec", id, "wget", "-qO-", url])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(text(&out.stdout).trim().to_string())
    } else {
        Err(format!("wget {url} from {pod}: {}", text(&out.stderr)))
    }
}
