//! Kubeconfigs: one made for a client certificate, written with its credentials, and merged
//! into a user's file (entries replaced by name, the context made current, the file 0600).
//! Below every part that hands out access: the management cluster, kubeadm, the nodes.

use std::path::{Path, PathBuf};

use base64::Engine;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::pki::KeyPairPem;

#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("writing a kubeconfig: {0}")]
    Serialize(String),
    #[error("the kubeconfig {} cannot be read: {message}; fix or move it, or pass --kubeconfig", path.display())]
    Read { path: PathBuf, message: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> KubeconfigError + '_ {
    move |source| KubeconfigError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A kubeconfig with one cluster, user and context, named as given; the context is current.
pub fn build(
    cluster: &str,
    user: &str,
    context: &str,
    server: &str,
    ca_pem: &str,
    client: &KeyPairPem,
) -> Kubeconfig {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user = user.to_string();
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: cluster.to_string(),
            cluster: Some(Cluster {
                server: Some(server.to_string()),
                certificate_authority_data: Some(b64(ca_pem)),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.clone(),
            auth_info: Some(AuthInfo {
                client_certificate_data: Some(b64(&client.cert)),
                client_key_data: Some(b64(&client.key).into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: context.to_string(),
            context: Some(Context {
                cluster: cluster.to_string(),
                user: Some(user),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(context.to_string()),
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        ..Default::default()
    }
}

/// Serializes a kubeconfig with its credentials (kube's own serialization keeps them).
pub fn to_yaml(config: &Kubeconfig) -> Result<String, KubeconfigError> {
    crate::yaml::to_string(config).map_err(|e| KubeconfigError::Serialize(e.to_string()))
}

/// Adds (or replaces) the entries of `new` in the kubeconfig at `path`, makes its context
/// current, and writes the file 0600.
pub fn merge(path: &Path, new: &Kubeconfig) -> Result<(), KubeconfigError> {
    let mut config = if path.exists() {
        Kubeconfig::read_from(path).map_err(|e| KubeconfigError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?
    } else {
        Kubeconfig {
            api_version: Some("v1".into()),
            kind: Some("Config".into()),
            ..Default::default()
        }
    };
    for c in &new.clusters {
        config.clusters.retain(|x| x.name != c.name);
        config.clusters.push(c.clone());
    }
    for a in &new.auth_infos {
        config.auth_infos.retain(|x| x.name != a.name);
        config.auth_infos.push(a.clone());
    }
    for c in &new.contexts {
        config.contexts.retain(|x| x.name != c.name);
        config.contexts.push(c.clone());
    }
    config.current_context = new.current_context.clone();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let text = to_yaml(&config)?;
    crate::pki::write_private(path, text.as_bytes()).map_err(io(path))
}
