//! The bootstrap data: a cloud-config that writes the certificates and kubeadm's configuration
//! and runs `kubeadm init` or `kubeadm join`, then leaves the success sentinel Cluster API
//! providers look for.

use serde::Serialize;
use serde_json::{Value, json};

use crate::api::kubeadm_config::{KubeadmConfigSpec, User};

/// Where kubeadm's configuration goes on the first control-plane machine.
pub const INIT_CONFIG_PATH: &str = "/run/kubeadm/kubeadm.yaml";
/// Where it goes on machines that join.
pub const JOIN_CONFIG_PATH: &str = "/run/kubeadm/kubeadm-join-config.yaml";
/// What a successful bootstrap leaves behind.
pub const SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";

/// A file cloud-init writes (its fields in the order upstream's template writes them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WriteFile {
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    pub owner: String,
    pub permissions: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    pub content: String,
}

/// The cloud-config document, its keys in upstream's order: a reader that runs the modules
/// in document order (CAPD's) writes the files before it runs kubeadm.
#[derive(Serialize)]
struct CloudConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    bootcmd: Option<&'a [String]>,
    write_files: &'a [WriteFile],
    runcmd: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ntp: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    users: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mounts: Option<&'a [Vec<String>]>,
}

impl WriteFile {
    pub fn new(path: &str, permissions: &str, content: &str) -> WriteFile {
        WriteFile {
            path: path.into(),
            owner: "root:root".into(),
            permissions: permissions.into(),
            content: content.into(),
            encoding: None,
            append: false,
        }
    }
}

/// Whether the machine creates the cluster or joins it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Init,
    Join,
}

/// The cloud-config for a machine: the given files (certificates, the spec's own files) and
/// kubeadm's configuration, then preKubeadmCommands, kubeadm, the sentinel, and
/// postKubeadmCommands.
pub fn cloud_config(
    spec: &KubeadmConfigSpec,
    action: Action,
    kubeadm_config: &str,
    mut files: Vec<WriteFile>,
) -> String {
    let (path, command) = match action {
        Action::Init => (
            INIT_CONFIG_PATH,
            format!("kubeadm init --config {INIT_CONFIG_PATH}"),
        ),
        Action::Join => (
            JOIN_CONFIG_PATH,
            format!("kubeadm join --config {JOIN_CONFIG_PATH}"),
        ),
    };
    let verbosity = spec
        .verbosity
        .map(|v| format!(" --v={v}"))
        .unwrap_or_default();
    files.push(WriteFile::new(path, "0640", kubeadm_config));
    files.push(WriteFile::new(
        "/run/cluster-api/placeholder",
        "0640",
        "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)",
    ));
    let mut runcmd: Vec<String> = spec.pre_kubeadm_commands.clone().unwrap_or_default();
    runcmd.push(format!("{command}{verbosity} && echo success > {SENTINEL}"));
    runcmd.extend(spec.post_kubeadm_commands.clone().unwrap_or_default());
    let config = CloudConfig {
        bootcmd: spec.boot_commands.as_deref().filter(|b| !b.is_empty()),
        write_files: &files,
        runcmd,
        ntp: spec.ntp.as_ref().map(|ntp| {
            json!({"enabled": ntp.enabled.unwrap_or(true), "servers": ntp.servers.clone().unwrap_or_default()})
        }),
        users: spec
            .users
            .as_ref()
            .filter(|u| !u.is_empty())
            .map(|users| users.iter().map(user).collect()),
        mounts: spec.mounts.as_deref().filter(|m| !m.is_empty()),
    };
    let body = crate::yaml::to_string(&config).expect("cloud-config serializes");
    format!("## template: jinja\n#cloud-config\n{body}")
}

fn user(u: &User) -> Value {
    let mut v = json!({"name": u.name});
    let fields: [(&str, Option<Value>); 10] = [
        ("gecos", u.gecos.clone().map(Value::from)),
        ("groups", u.groups.clone().map(Value::from)),
        ("homedir", u.home_dir.clone().map(Value::from)),
        ("inactive", u.inactive.map(Value::from)),
        ("shell", u.shell.clone().map(Value::from)),
        ("passwd", u.passwd.clone().map(Value::from)),
        ("primary_group", u.primary_group.clone().map(Value::from)),
        ("lock_passwd", u.lock_password.map(Value::from)),
        ("sudo", u.sudo.clone().map(Value::from)),
        (
            "ssh_authorized_keys",
            u.ssh_authorized_keys.clone().map(|k| json!(k)),
        ),
    ];
    for (key, value) in fields {
        if let Some(value) = value {
            v[key] = value;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_data_writes_the_config_and_runs_kubeadm_init_then_the_sentinel() {
        let spec: KubeadmConfigSpec = serde_json::from_value(json!({
            "preKubeadmCommands": ["echo before"],
            "postKubeadmCommands": ["echo after"],
            "users": [{"name": "ops", "sudo": "ALL=(ALL) NOPASSWD:ALL", "sshAuthorizedKeys": ["ssh-ed25519 AAA"]}],
            "ntp": {"servers": ["time.example"]}
        }))
        .unwrap();
        let files = vec![WriteFile::new("/etc/kubernetes/pki/ca.crt", "0640", "CERT")];
        let text = cloud_config(&spec, Action::Init, "kind: InitConfiguration\n", files);
        assert!(
            text.starts_with("## template: jinja\n#cloud-config\n"),
            "{text}"
        );
        // Upstream's key order: an executor that follows the document writes kubeadm's
        // configuration before it runs kubeadm.
        let at = |key: &str| text.find(&format!("\n{key}:")).unwrap_or(usize::MAX);
        assert!(at("write_files") < at("runcmd"), "{text}");
        assert!(
            at("runcmd") < at("ntp") && at("ntp") < at("users"),
            "{text}"
        );
        let config: Value =
            crate::yaml::from_str(text.split_once("#cloud-config\n").unwrap().1).unwrap();
        let paths: Vec<&str> = config["write_files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "/etc/kubernetes/pki/ca.crt",
                INIT_CONFIG_PATH,
                "/run/cluster-api/placeholder"
            ]
        );
        assert_eq!(
            config["write_files"][1]["content"],
            "kind: InitConfiguration\n"
        );
        assert_eq!(
            config["runcmd"],
            json!([
                "echo before",
                "kubeadm init --config /run/kubeadm/kubeadm.yaml && echo success > /run/cluster-api/bootstrap-success.complete",
                "echo after"
            ])
        );
        assert_eq!(
            config["users"][0]["ssh_authorized_keys"],
            json!(["ssh-ed25519 AAA"])
        );
        assert_eq!(
            config["ntp"],
            json!({"enabled": true, "servers": ["time.example"]})
        );
    }

    #[test]
    fn join_data_runs_kubeadm_join() {
        let text = cloud_config(
            &KubeadmConfigSpec::default(),
            Action::Join,
            "kind: JoinConfiguration\n",
            Vec::new(),
        );
        let config: Value =
            crate::yaml::from_str(text.split_once("#cloud-config\n").unwrap().1).unwrap();
        assert_eq!(config["write_files"][0]["path"], JOIN_CONFIG_PATH);
        assert_eq!(
            config["runcmd"][0],
            "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml && echo success > /run/cluster-api/bootstrap-success.complete"
        );
    }
}
