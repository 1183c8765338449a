//! Static pods as the node agent runs them: a manifest in `/etc/kubernetes/manifests` becomes
//! a process on the node — etcd's image runs Debian's etcd binary, the control-plane images run
//! capictl's own API server, controller-manager and scheduler — with the container's command,
//! environment and probe, and a hash of the manifest that changes when it does (kubelet's
//! `kubernetes.io/config.hash`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::image::NODE_BINARY;

/// What runs for a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticPod {
    /// The mirror Pod's name is `<name>-<node>`.
    pub name: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// The manifest's hash (hex).
    pub hash: String,
    pub container: String,
    pub image: String,
    /// The program and its arguments.
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    /// What says the process is ready: its readiness probe, else startup, else liveness.
    pub probe: Option<Probe>,
    /// The whole manifest, for the mirror Pod's spec.
    pub manifest: Value,
}

/// An HTTP(S) GET probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// Why a manifest cannot run here.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("not a Pod manifest: {0}")]
    Invalid(String),
    #[error(
        "container image {0} is not one this node can run (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)"
    )]
    Unsupported(String),
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The program an image stands for on this node.
fn program(image: &str) -> Option<Vec<String>> {
    let name = image.rsplit('/').next()?.split([':', '@']).next()?;
    match name {
        "etcd" => Some(vec!["/usr/bin/etcd".into()]),
        "kube-apiserver" | "kube-controller-manager" | "kube-scheduler" => {
            Some(vec![NODE_BINARY.into(), "node".into(), name.into()])
        }
        _ => None,
    }
}

/// The hash kubelet records of a manifest (hex SHA-256 of its text, shortened).
pub fn hash(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    crate::pki::hex(&digest.as_ref()[..16])
}

/// Reads a manifest.
pub fn parse(text: &str) -> Result<StaticPod, ManifestError> {
    let manifest: Value =
        crate::yaml::from_str(text).map_err(|e| ManifestError::Invalid(e.to_string()))?;
    if manifest["kind"] != "Pod" {
        return Err(ManifestError::Invalid(format!(
            "kind is {}",
            manifest["kind"]
        )));
    }
    let name = manifest["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ManifestError::Invalid("metadata.name is missing".into()))?
        .to_string();
    let container = &manifest["spec"]["containers"][0];
    let image = container["image"].as_str().unwrap_or_default().to_string();
    let mut argv = program(&image).ok_or_else(|| ManifestError::Unsupported(image.clone()))?;
    // The container's command names the program; what follows are its arguments.
    let command = strings(&container["command"]);
    argv.extend(command.into_iter().skip(1));
    argv.extend(strings(&container["args"]));
    let env = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .collect();
    let probe = ["readinessProbe", "startupProbe", "livenessProbe"]
        .iter()
        .find_map(|p| {
            let get = container.get(*p)?.get("httpGet")?;
            Some(Probe {
                https: get["scheme"]
                    .as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case("https")),
                host: get["host"].as_str().unwrap_or("127.0.0.1").to_string(),
                port: get["port"].as_u64().and_then(|p| u16::try_from(p).ok())?,
                path: get["path"].as_str().unwrap_or("/").to_string(),
            })
        });
    Ok(StaticPod {
        container: container["name"].as_str().unwrap_or(&name).to_string(),
        name,
        namespace: manifest["metadata"]["namespace"]
            .as_str()
            .unwrap_or("kube-system")
            .to_string(),
        labels: string_map(&manifest["metadata"]["labels"]),
        annotations: string_map(&manifest["metadata"]["annotations"]),
        hash: hash(text),
        image,
        argv,
        env,
        probe,
        manifest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_become_processes() {
        let etcd = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n  labels: {component: etcd, tier: control-plane}\nspec:\n  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.5.16-0\n    command: [etcd, --name=cp-1, --data-dir=/var/lib/etcd]\n    env: [{name: ETCD_UNSUPPORTED_ARCH, value: arm64}]\n    livenessProbe:\n      httpGet: {host: 127.0.0.1, port: 2381, path: /health, scheme: HTTP}\n";
        let pod = parse(etcd).unwrap();
        assert_eq!(
            pod.argv,
            ["/usr/bin/etcd", "--name=cp-1", "--data-dir=/var/lib/etcd"]
        );
        assert_eq!(
            pod.env,
            [("ETCD_UNSUPPORTED_ARCH".to_string(), "arm64".to_string())]
        );
        assert_eq!(
            pod.probe,
            Some(Probe {
                https: false,
                host: "127.0.0.1".into(),
                port: 2381,
                path: "/health".into()
            })
        );
        assert_eq!(pod.labels["component"], "etcd");
        let api = etcd
            .replace(
                "registry.k8s.io/etcd:3.5.16-0",
                "registry.example/kube-apiserver@sha256:00",
            )
            .replace("[etcd,", "[kube-apiserver,");
        let pod2 = parse(&api).unwrap();
        assert_eq!(
            pod2.argv[..3],
            [
                NODE_BINARY.to_string(),
                "node".to_string(),
                "kube-apiserver".to_string()
            ]
        );
        assert_ne!(pod.hash, pod2.hash, "the hash follows the manifest");
        let nginx = etcd.replace("registry.k8s.io/etcd:3.5.16-0", "nginx:1");
        assert_eq!(
            parse(&nginx),
            Err(ManifestError::Unsupported("nginx:1".into()))
        );
        assert!(matches!(
            parse("kind: Service\n"),
            Err(ManifestError::Invalid(_))
        ));
    }
}
