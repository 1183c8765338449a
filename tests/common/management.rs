//! A management cluster started with `capictl management up`, driven by the capictl binary
//! and real kubectl, as users drive it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// kubectl from $KUBECTL (scripts/test installs a current one), else from PATH; without one
/// the test fails, saying how to get it.
pub fn kubectl_binary() -> String {
    if let Ok(k) = std::env::var("KUBECTL") {
        return k;
    }
    let found = Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "no kubectl: run scripts/test (it installs one), or set KUBECTL"
    );
    "kubectl".to_string()
}

/// Every kubectl to test with: the current one and, when scripts/test provides it, 1.20.
pub fn all_kubectls() -> Vec<String> {
    let mut all = vec![kubectl_binary()];
    all.extend(std::env::var("KUBECTL_1_20").ok());
    all
}

/// A management cluster started with `capictl management up`, stopped when dropped.
pub struct Management {
    pub dir: PathBuf,
    pub kubectl: String,
    /// What `management up` is given beside the directory and kubeconfig.
    up_args: Vec<String>,
}

pub fn capictl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Management {
    pub fn up() -> Management {
        Management::up_with(kubectl_binary())
    }

    pub fn up_with(kubectl: String) -> Management {
        Management::up_with_args(kubectl, Vec::new())
    }

    /// A management cluster on a TLS etcd (`management up --etcd-endpoints` and its TLS flags).
    pub fn up_on_etcd(endpoint: &str, tls: &super::EtcdClientTls) -> Management {
        let path = |p: &PathBuf| p.display().to_string();
        Management::up_with_args(
            kubectl_binary(),
            vec![
                format!("--etcd-endpoints={endpoint}"),
                format!("--etcd-cafile={}", path(&tls.ca)),
                format!("--etcd-certfile={}", path(&tls.cert)),
                format!("--etcd-keyfile={}", path(&tls.key)),
            ],
        )
    }

    /// A management cluster started with these extra `management up` flags.
    pub fn up_with_extra_args(args: &[&str]) -> Management {
        Management::up_with_args(
            kubectl_binary(),
            args.iter().map(|a| a.to_string()).collect(),
        )
    }

    /// A management cluster whose audit log follows the policy in `policy` (YAML).
    pub fn up_with_audit_policy(policy: &str) -> Management {
        let file =
            std::env::temp_dir().join(format!("capictl-audit-{}.yaml", uuid::Uuid::new_v4()));
        std::fs::write(&file, policy).unwrap();
        let m = Management::up_with_args(
            kubectl_binary(),
            vec![format!("--audit-policy-file={}", file.display())],
        );
        let _ = std::fs::remove_file(file);
        m
    }

    fn up_with_args(kubectl: String, up_args: Vec<String>) -> Management {
        let m = Management::new(kubectl, up_args);
        m.start();
        m
    }

    /// A management cluster's directory, not started (to restore a backup into, say).
    pub fn unstarted() -> Management {
        Management::new(kubectl_binary(), Vec::new())
    }

    fn new(kubectl: String, up_args: Vec<String>) -> Management {
        let dir = std::env::temp_dir().join(format!("capictl-kubectl-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(dir.join("home")).unwrap();
        Management {
            dir,
            kubectl,
            up_args,
        }
    }

    /// Another server of `first`'s management cluster, as the servers of a highly available
    /// one behind a load balancer are: the same etcd and flags, the same CA (its state
    /// directory's `ca.crt` and `ca.key` copied), an address of its own.
    pub fn up_beside(first: &Management) -> Management {
        let m = Management::new(first.kubectl.clone(), first.up_args.clone());
        std::fs::create_dir_all(m.state()).unwrap();
        for file in ["ca.crt", "ca.key"] {
            std::fs::copy(
                Path::new(&first.state()).join(file),
                Path::new(&m.state()).join(file),
            )
            .unwrap();
        }
        m.start();
        m
    }

    /// Kills the server (SIGKILL: no goodbye), as a crash or a lost machine would.
    pub fn kill(&self) {
        let status = Command::new("kill")
            .args(["-KILL", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -KILL {}", self.pid());
    }

    /// The process serving this management cluster now.
    fn pid(&self) -> u32 {
        let info: serde_json::Value = serde_json::from_slice(
            &std::fs::read(Path::new(&self.state()).join("server.json")).unwrap(),
        )
        .unwrap();
        info["pid"].as_u64().unwrap() as u32
    }

    pub fn state(&self) -> String {
        self.dir.join("state").display().to_string()
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The server's URL, from the admin kubeconfig.
    pub fn server(&self) -> String {
        let admin: serde_json::Value =
            capictl::yaml::from_str(&std::fs::read_to_string(self.kubeconfig()).unwrap()).unwrap();
        admin["clusters"][0]["cluster"]["server"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn start(&self) -> String {
        let (state, kubeconfig) = (self.state(), self.kubeconfig());
        let mut args = vec![
            "management",
            "up",
            "--dir",
            &state,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ];
        args.extend(self.up_args.iter().map(String::as_str));
        let out = capictl(&args);
        assert!(out.status.success(), "management up: {}", text(&out.stderr));
        text(&out.stderr)
    }

    pub fn down(&self) -> String {
        let out = capictl(&["management", "down", "--dir", &self.state()]);
        assert!(
            out.status.success(),
            "management down: {}",
            text(&out.stderr)
        );
        text(&out.stderr)
    }

    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.kubectl);
        c.args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", self.dir.join("home"))
            .stdin(Stdio::null());
        c
    }

    /// Runs kubectl, feeding `input` on stdin when given, and returns what it did.
    pub fn kubectl_output(&self, args: &[&str], input: Option<&str>) -> Output {
        let mut c = self.kubectl_command(args);
        if input.is_some() {
            c.stdin(Stdio::piped());
        }
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        if let Some(text) = input {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        }
        child.wait_with_output().unwrap()
    }

    /// Runs kubectl, feeding `input` on stdin when given; returns stdout, failing on an error.
    pub fn kubectl_in(&self, args: &[&str], input: Option<&str>) -> String {
        let out = self.kubectl_output(args, input);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_in(args, None)
    }

    /// `capictl generate crds` applied, every CRD served before this returns.
    pub fn install_crds(&self) {
        let crds = capictl(&["generate", "crds"]);
        assert!(crds.status.success(), "{}", text(&crds.stderr));
        self.kubectl_in(&["apply", "-f", "-"], Some(&text(&crds.stdout)));
        self.kubectl(&["wait", "--for=condition=Established", "crd", "--all"]);
    }

    /// `capictl generate cluster NAME --infrastructure in-memory` at v1.30.4 with one control
    /// plane and `workers` workers in namespace default, applied with kubectl.
    pub fn apply_in_memory_cluster(&self, name: &str, workers: u32) {
        let workers = workers.to_string();
        let generated = capictl(&[
            "generate",
            "cluster",
            name,
            "--infrastructure",
            "in-memory",
            "--kubernetes-version",
            "v1.30.4",
            "--control-plane-machine-count",
            "1",
            "--worker-machine-count",
            &workers,
            "--target-namespace",
            "default",
        ]);
        assert!(generated.status.success(), "{}", text(&generated.stderr));
        self.kubectl_in(&["apply", "-f", "-"], Some(&text(&generated.stdout)));
    }
}

impl Drop for Management {
    fn drop(&mut self) {
        let _ = capictl(&["management", "down", "--dir", &self.state()]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A kubeconfig of the management cluster for `user` in `groups`, whose client certificate
/// `signer` signed (the cluster's own CA by default).
pub fn kubeconfig_of(m: &Management, user: &str, groups: &[&str]) -> PathBuf {
    let ours = capictl::pki::Pki::load_or_create(std::path::Path::new(&m.state())).unwrap();
    kubeconfig_signed_by(m, &ours, user, groups)
}

pub fn kubeconfig_signed_by(
    m: &Management,
    signer: &capictl::pki::Pki,
    user: &str,
    groups: &[&str],
) -> PathBuf {
    let ours = capictl::pki::Pki::load_or_create(std::path::Path::new(&m.state())).unwrap();
    let cert = signer.client_certificate(user, groups).unwrap();
    let config = capictl::management::kubeconfig(user, &m.server(), &ours.ca.cert, &cert);
    let path = m.dir.join(format!("{user}.kubeconfig"));
    std::fs::write(&path, capictl::kubeconfig::to_yaml(&config).unwrap()).unwrap();
    path
}
