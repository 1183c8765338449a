//! Users added the ways Kubernetes adds them: a certificate `openssl x509 -req` signed with the
//! cluster CA (X.509 v1, no extensions), and the CertificateSigningRequest API.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::common::management::{Management, text};
use super::{kubectl_as, refused_with, user_with_cluster_rules};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        text(&out.stderr)
    );
}

/// A kubeconfig for the management cluster with this certificate and key (PEM files).
fn kubeconfig_with(m: &Management, user: &str, cert: &Path, key: &Path) -> PathBuf {
    let path = m.dir.join(format!("{user}-own.kubeconfig"));
    let ca = Path::new(&m.state()).join("ca.crt");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: m\n  context: {{cluster: m, user: {user}}}\ncurrent-context: m\n",
        m.server(),
        ca.display(),
        cert.display(),
        key.display()
    );
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn an_openssl_signed_x509_v1_certificate_logs_in() {
    let m = Management::up();
    let dir = m.dir.join("openssl");
    std::fs::create_dir_all(&dir).unwrap();
    let state = Path::new(&m.state()).to_path_buf();
    openssl(&dir, &["genrsa", "-out", "dana.key", "2048"]);
    openssl(
        &dir,
        &[
            "req",
            "-new",
            "-key",
            "dana.key",
            "-subj",
            "/CN=dana/O=auditors",
            "-out",
            "dana.csr",
        ],
    );
    let ca = state.join("ca.crt");
    let ca_key = state.join("ca.key");
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "dana.csr",
            "-CA",
            ca.to_str().unwrap(),
            "-CAkey",
            ca_key.to_str().unwrap(),
            "-CAcreateserial",
            "-days",
            "30",
            "-out",
            "dana.crt",
        ],
    );
    let info = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(dir.join("dana.crt"))
        .output()
        .unwrap();
    assert!(
        text(&info.stdout).contains("Version: 1 (0x0)"),
        "{}",
        text(&info.stdout)
    );
    let kubeconfig = kubeconfig_with(&m, "dana", &dir.join("dana.crt"), &dir.join("dana.key"));
    let whoami = kubectl_as(
        &m,
        &kubeconfig,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert!(whoami.status.success(), "{}", text(&whoami.stderr));
    assert_eq!(
        text(&whoami.stdout),
        "dana [\"auditors\",\"system:authenticated\"]"
    );
    let secrets = kubectl_as(&m, &kubeconfig, &["get", "secrets", "-A"]);
    refused_with(&secrets, "User \"dana\" cannot list resource \"secrets\"");
}

#[test]
fn a_user_added_through_a_certificate_signing_request() {
    let m = Management::up();
    let dir = m.dir.join("csr");
    std::fs::create_dir_all(&dir).unwrap();
    openssl(&dir, &["genrsa", "-out", "erin.key", "2048"]);
    openssl(
        &dir,
        &[
            "req",
            "-new",
            "-key",
            "erin.key",
            "-subj",
            "/CN=erin/O=platform",
            "-out",
            "erin.csr",
        ],
    );
    use base64::Engine;
    let request = base64::engine::general_purpose::STANDARD
        .encode(std::fs::read(dir.join("erin.csr")).unwrap());
    let csr = |name: &str, signer: &str| {
        format!(
            "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {request}\n  signerName: {signer}\n  expirationSeconds: 86400\n  usages: [client auth]\n"
        )
    };
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some(&csr("erin", "kubernetes.io/kube-apiserver-client")),
    );
    // Nothing is signed before someone approves it, and not everyone may.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        m.kubectl(&["get", "csr", "erin", "-o", "jsonpath={.status.certificate}"]),
        ""
    );
    let frank = user_with_cluster_rules(
        &m,
        "frank",
        r#"[{apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests, certificatesigningrequests/approval], verbs: [get, list, update]}]"#,
    );
    let refused = kubectl_as(&m, &frank, &["certificate", "approve", "erin"]);
    refused_with(
        &refused,
        "user not permitted to approve requests with signerName \"kubernetes.io/kube-apiserver-client\"",
    );
    m.kubectl(&["certificate", "approve", "erin"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let issued = loop {
        let certificate =
            m.kubectl(&["get", "csr", "erin", "-o", "jsonpath={.status.certificate}"]);
        if !certificate.is_empty() {
            break certificate;
        }
        assert!(
            Instant::now() < deadline,
            "the approved request was never signed"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(issued.trim())
        .unwrap();
    std::fs::write(dir.join("erin.crt"), pem).unwrap();
    let kubeconfig = kubeconfig_with(&m, "erin", &dir.join("erin.crt"), &dir.join("erin.key"));
    let whoami = kubectl_as(
        &m,
        &kubeconfig,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert!(whoami.status.success(), "{}", text(&whoami.stderr));
    assert_eq!(
        text(&whoami.stdout),
        "erin [\"platform\",\"system:authenticated\"]"
    );
    let enddate = Command::new("openssl")
        .args(["x509", "-noout", "-checkend", "90000", "-in"])
        .arg(dir.join("erin.crt"))
        .output()
        .unwrap();
    assert!(
        !enddate.status.success(),
        "the certificate lives the 24 hours asked for, not a year"
    );

    // A kubelet client request for someone who is not a node is approved but never signed.
    m.kubectl_in(
        &["apply", "-f", "-"],
        Some(&csr(
            "not-a-node",
            "kubernetes.io/kube-apiserver-client-kubelet",
        )),
    );
    m.kubectl(&["certificate", "approve", "not-a-node"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let conditions = m.kubectl(&[
            "get",
            "csr",
            "not-a-node",
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ]);
        if conditions.contains("Failed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the request was neither signed nor failed: {conditions}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        m.kubectl(&[
            "get",
            "csr",
            "not-a-node",
            "-o",
            "jsonpath={.status.certificate}"
        ]),
        ""
    );
}
