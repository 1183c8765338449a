//! The certificates and kubeconfigs kubeadm makes on a control-plane node, in kubeadm's layout
//! under `/etc/kubernetes`, from the CAs the bootstrap data wrote (`ca`, `etcd/ca`,
//! `front-proxy-ca`, `sa`). A certificate already there is kept, so a second run changes
//! nothing.

use std::path::{Path, PathBuf};

use crate::node::{Layout, NodeError, Result, read_file, write_file};
use crate::pki::{CertificatePolicy, KeyPairPem, Pki, Usage};

/// Who this node is, as its certificates name it.
#[derive(Clone, Debug)]
pub struct Identity {
    pub node_name: String,
    /// The address its API server and etcd advertise.
    pub address: String,
    /// `host:port` of the cluster's API servers.
    pub endpoint: String,
    pub dns_domain: String,
    /// The `kubernetes` Service's cluster IP.
    pub service_ip: String,
    /// `apiServer.certSANs`.
    pub cert_sans: Vec<String>,
    /// `etcd.local.serverCertSANs` and `peerCertSANs`.
    pub etcd_server_sans: Vec<String>,
    pub etcd_peer_sans: Vec<String>,
}

/// The host part of `host:port` (IPv6 in brackets too).
pub fn endpoint_host(endpoint: &str) -> &str {
    match endpoint.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => {
            host.trim_start_matches('[').trim_end_matches(']')
        }
        _ => endpoint,
    }
}

/// A CA from `<name>.crt` and `<name>.key` in the certificates directory.
pub fn load_ca(pki: &Path, name: &str) -> Result<Pki> {
    let cert = pki.join(format!("{name}.crt"));
    let key = pki.join(format!("{name}.key"));
    if !cert.exists() || !key.exists() {
        return Err(NodeError::Config(format!(
            "the CA {} and its key {} are missing: the bootstrap data writes them on control-plane machines",
            cert.display(),
            key.display()
        )));
    }
    Ok(Pki {
        ca: KeyPairPem {
            cert: read_file(&cert)?,
            key: read_file(&key)?,
        },
    })
}

/// One leaf certificate kubeadm makes: file name (under the certificates directory), the CA
/// that signs it, subject, and use.
struct Leaf {
    file: &'static str,
    ca: &'static str,
    common_name: String,
    organizations: &'static [&'static str],
    sans: Vec<String>,
    usage: Usage,
}

fn dedup(mut names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| !n.is_empty() && seen.insert(n.clone()));
    names
}

fn leaves(id: &Identity) -> Vec<Leaf> {
    let mut api_sans = vec![
        id.node_name.clone(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        format!("kubernetes.default.svc.{}", id.dns_domain),
        id.service_ip.clone(),
        id.address.clone(),
        endpoint_host(&id.endpoint).to_string(),
    ];
    api_sans.extend(id.cert_sans.iter().cloned());
    let etcd_sans = |extra: &[String]| {
        let mut sans = vec![
            id.node_name.clone(),
            "localhost".into(),
            id.address.clone(),
            "127.0.0.1".into(),
            "::1".into(),
        ];
        sans.extend(extra.iter().cloned());
        dedup(sans)
    };
    vec![
        Leaf {
            file: "apiserver",
            ca: "ca",
            common_name: "kube-apiserver".into(),
            organizations: &[],
            sans: dedup(api_sans),
            usage: Usage::Server,
        },
        Leaf {
            file: "apiserver-kubelet-client",
            ca: "ca",
            common_name: "kube-apiserver-kubelet-client".into(),
            organizations: &["kubeadm:cluster-admins"],
            sans: vec![],
            usage: Usage::Client,
        },
        Leaf {
            file: "front-proxy-client",
            ca: "front-proxy-ca",
            common_name: "front-proxy-client".into(),
            organizations: &[],
            sans: vec![],
            usage: Usage::Client,
        },
        Leaf {
            file: "etcd/server",
            ca: "etcd/ca",
            common_name: id.node_name.clone(),
            organizations: &[],
            sans: etcd_sans(&id.etcd_server_sans),
            usage: Usage::ServerAndClient,
        },
        Leaf {
            file: "etcd/peer",
            ca: "etcd/ca",
            common_name: id.node_name.clone(),
            organizations: &[],
            sans: etcd_sans(&id.etcd_peer_sans),
            usage: Usage::ServerAndClient,
        },
        Leaf {
            file: "etcd/healthcheck-client",
            ca: "etcd/ca",
            common_name: "kube-etcd-healthcheck-client".into(),
            organizations: &[],
            sans: vec![],
            usage: Usage::Client,
        },
        Leaf {
            file: "apiserver-etcd-client",
            ca: "etcd/ca",
            common_name: "kube-apiserver-etcd-client".into(),
            organizations: &[],
            sans: vec![],
            usage: Usage::Client,
        },
    ]
}

/// Makes the leaf certificates that are missing, as the policy says; says which it made.
pub fn ensure_certificates(
    pki: &Path,
    id: &Identity,
    policy: &CertificatePolicy,
) -> Result<Vec<String>> {
    let mut made = Vec::new();
    for leaf in leaves(id) {
        let cert = pki.join(format!("{}.crt", leaf.file));
        let key = pki.join(format!("{}.key", leaf.file));
        if cert.exists() && key.exists() {
            continue;
        }
        let ca = load_ca(pki, leaf.ca)?;
        let pair = ca.issue_with(
            policy,
            &leaf.common_name,
            leaf.organizations,
            &leaf.sans,
            leaf.usage,
        )?;
        write_file(&cert, pair.cert.as_bytes(), 0o644)?;
        write_file(&key, pair.key.as_bytes(), 0o600)?;
        made.push(leaf.file.to_string());
    }
    Ok(made)
}

/// A kubeconfig file kubeadm writes: its file name, user, groups and which server it names.
pub struct KubeconfigFile {
    pub file: &'static str,
    pub user: String,
    pub groups: &'static [&'static str],
    /// The cluster endpoint (through the load balancer) rather than this node's API server.
    pub via_endpoint: bool,
}

/// The kubeconfigs of a control-plane node.
pub fn control_plane_kubeconfigs(node_name: &str) -> Vec<KubeconfigFile> {
    vec![
        KubeconfigFile {
            file: "admin.conf",
            user: "kubernetes-admin".into(),
            groups: &["kubeadm:cluster-admins"],
            via_endpoint: true,
        },
        KubeconfigFile {
            file: "super-admin.conf",
            user: "kubernetes-super-admin".into(),
            groups: &["system:masters"],
            via_endpoint: false,
        },
        KubeconfigFile {
            file: "kubelet.conf",
            user: format!("system:node:{node_name}"),
            groups: &["system:nodes"],
            via_endpoint: true,
        },
        KubeconfigFile {
            file: "controller-manager.conf",
            user: "system:kube-controller-manager".into(),
            groups: &[],
            via_endpoint: false,
        },
        KubeconfigFile {
            file: "scheduler.conf",
            user: "system:kube-scheduler".into(),
            groups: &[],
            via_endpoint: false,
        },
    ]
}

/// A kubeconfig's YAML: `server`, the CA, and a client certificate.
pub fn kubeconfig_yaml(
    server: &str,
    ca_cert: &str,
    client: &KeyPairPem,
    user: &str,
) -> Result<String> {
    let config = crate::kubeconfig::build(
        "kubernetes",
        user,
        &format!("{user}@kubernetes"),
        server,
        ca_cert,
        client,
    );
    crate::yaml::to_string(&config)
        .map_err(|e| NodeError::Failed(format!("writing a kubeconfig: {e}")))
}

/// The kubeconfig in `kube-public/cluster-info`: the cluster's endpoint and CA, no user.
pub fn kubeconfig_yaml_without_user(server: &str, ca_cert: &str) -> Result<String> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_cert);
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\npreferences: {{}}\nusers: null\n"
    ))
}

/// Writes the kubeconfigs that are missing; the local API server is `https://<address>:6443`.
pub fn ensure_kubeconfigs(
    layout: &Layout,
    id: &Identity,
    policy: &CertificatePolicy,
) -> Result<Vec<PathBuf>> {
    let ca = load_ca(&layout.pki(), "ca")?;
    let mut written = Vec::new();
    for file in control_plane_kubeconfigs(&id.node_name) {
        let path = layout.kubernetes().join(file.file);
        if path.exists() {
            continue;
        }
        let server = if file.via_endpoint {
            format!("https://{}", id.endpoint)
        } else {
            format!(
                "https://{}",
                join_host_port(&id.address, super::config::API_SERVER_PORT)
            )
        };
        let client = ca.issue_with(policy, &file.user, file.groups, &[], Usage::Client)?;
        write_file(
            &path,
            kubeconfig_yaml(&server, &ca.ca.cert, &client, &file.user)?.as_bytes(),
            0o600,
        )?;
        written.push(path);
    }
    Ok(written)
}

pub use crate::pki::join_host_port;

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity {
            node_name: "cp-1".into(),
            address: "172.18.0.5".into(),
            endpoint: "172.18.0.3:6443".into(),
            dns_domain: "cluster.local".into(),
            service_ip: "10.96.0.1".into(),
            cert_sans: vec!["localhost".into(), "127.0.0.1".into()],
            etcd_server_sans: vec![],
            etcd_peer_sans: vec![],
        }
    }

    fn sans_of(pem: &str) -> Vec<String> {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        cert.subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|n| match n {
                x509_parser::extensions::GeneralName::DNSName(d) => d.to_string(),
                x509_parser::extensions::GeneralName::IPAddress(b) if b.len() == 4 => {
                    std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()
                }
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// A certificate's public key algorithm and size, and the days it is valid.
    fn key_and_days(pem: &str) -> (String, i64) {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
        let key = match cert.public_key().parsed().unwrap() {
            x509_parser::public_key::PublicKey::RSA(rsa) => format!("RSA-{}", rsa.key_size()),
            x509_parser::public_key::PublicKey::EC(ec) => format!("EC-{}", ec.key_size()),
            other => format!("{other:?}"),
        };
        let validity = cert.validity();
        let days = (validity.not_after.timestamp() - validity.not_before.timestamp()) / 86400;
        (key, days)
    }

    #[test]
    fn leaf_certificates_in_kubeadms_layout_made_once() {
        let dir = std::env::temp_dir().join(format!("capictl-pki-{}", uuid::Uuid::new_v4()));
        let pki = dir.join("pki");
        let policy = CertificatePolicy {
            key: crate::pki::KeyAlgorithm::Rsa(2048),
            days: 30,
            ca_days: 3650,
        };
        for (name, cn) in [
            ("ca", "kubernetes"),
            ("etcd/ca", "etcd-ca"),
            ("front-proxy-ca", "front-proxy-ca"),
        ] {
            let ca = Pki::generate(cn).unwrap();
            write_file(
                &pki.join(format!("{name}.crt")),
                ca.ca.cert.as_bytes(),
                0o644,
            )
            .unwrap();
            write_file(
                &pki.join(format!("{name}.key")),
                ca.ca.key.as_bytes(),
                0o600,
            )
            .unwrap();
        }
        let made = ensure_certificates(&pki, &identity(), &policy).unwrap();
        assert_eq!(made.len(), 7, "{made:?}");
        // The policy's key and lifetime, whatever the CA's key.
        for leaf in ["apiserver.crt", "etcd/peer.crt", "front-proxy-client.crt"] {
            let cert = read_file(&pki.join(leaf)).unwrap();
            assert_eq!(key_and_days(&cert), ("RSA-2048".into(), 30), "{leaf}");
        }
        let sans = sans_of(&read_file(&pki.join("apiserver.crt")).unwrap());
        for want in [
            "cp-1",
            "kubernetes.default.svc.cluster.local",
            "10.96.0.1",
            "172.18.0.5",
            "172.18.0.3",
            "localhost",
            "127.0.0.1",
        ] {
            assert!(sans.contains(&want.to_string()), "{want} in {sans:?}");
        }
        let etcd = sans_of(&read_file(&pki.join("etcd/server.crt")).unwrap());
        assert!(etcd.contains(&"cp-1".to_string()) && etcd.contains(&"127.0.0.1".to_string()));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(pki.join("etcd/peer.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            ensure_certificates(&pki, &identity(), &policy)
                .unwrap()
                .is_empty(),
            "a second run makes nothing"
        );
        let layout = Layout::new(&dir);
        std::fs::create_dir_all(layout.kubernetes()).unwrap();
        std::fs::rename(&pki, layout.pki()).unwrap();
        let written = ensure_kubeconfigs(&layout, &identity(), &policy).unwrap();
        assert_eq!(written.len(), 5);
        let admin = read_file(&layout.kubernetes().join("admin.conf")).unwrap();
        assert!(admin.contains("https://172.18.0.3:6443"), "{admin}");
        let config = kube::config::Kubeconfig::from_yaml(&admin).unwrap();
        let client = config.auth_infos[0].auth_info.as_ref().unwrap();
        let client = client.client_certificate_data.as_ref().unwrap();
        use base64::Engine;
        let client = base64::engine::general_purpose::STANDARD
            .decode(client)
            .unwrap();
        let client = String::from_utf8(client).unwrap();
        assert_eq!(key_and_days(&client), ("RSA-2048".into(), 30));
        let local = read_file(&layout.kubernetes().join("controller-manager.conf")).unwrap();
        assert!(local.contains("https://172.18.0.5:6443"), "{local}");
        let err = load_ca(&dir, "nope").err().unwrap().to_string();
        assert!(err.contains("bootstrap data"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn endpoint_hosts() {
        assert_eq!(endpoint_host("10.0.0.1:6443"), "10.0.0.1");
        assert_eq!(endpoint_host("[::1]:6443"), "::1");
        assert_eq!(endpoint_host("lb.example"), "lb.example");
        assert_eq!(join_host_port("::1", 6443), "[::1]:6443");
    }
}
