//! The smaller holes: tokens outliving what they were bound to, TokenRequests for nothing,
//! names outside ASCII, `componentstatuses`, field selectors on fields left out, error bodies
//! in kube-apiserver's field order, and `capictl init` with a kubeconfig that cannot be used.

use std::process::Command;

use super::common::management::{Management, capictl, text};

/// A kubeconfig for the management cluster that authenticates with `token`.
fn token_kubeconfig(m: &Management, name: &str, token: &str) -> std::path::PathBuf {
    let path = m.dir.join(format!("{name}.kubeconfig"));
    let ca = std::path::Path::new(&m.state()).join("ca.crt");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster: {{server: {}, certificate-authority: {}}}\nusers:\n- name: t\n  user: {{token: {token}}}\ncontexts:\n- name: m\n  context: {{cluster: m, user: t}}\ncurrent-context: m\n",
            m.server(),
            ca.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn tokens_live_only_as_long_as_what_they_are_bound_to_and_requests_are_checked() {
    let m = Management::up();
    m.kubectl(&["create", "serviceaccount", "robot"]);
    m.kubectl(&[
        "create",
        "secret",
        "generic",
        "anchor",
        "--from-literal=a=b",
    ]);
    let token = m.kubectl(&[
        "create",
        "token",
        "robot",
        "--bound-object-kind=Secret",
        "--bound-object-name=anchor",
    ]);
    let kubeconfig = token_kubeconfig(&m, "robot", token.trim());
    let whoami = |m: &Management| {
        m.kubectl_output(
            &[
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
            None,
        )
    };
    let before = whoami(&m);
    assert_eq!(
        text(&before.stdout),
        "system:serviceaccount:default:robot",
        "{}",
        text(&before.stderr)
    );
    m.kubectl(&["delete", "secret", "anchor"]);
    let after = whoami(&m);
    assert!(!after.status.success(), "the token outlived its Secret");
    assert!(
        text(&after.stderr).contains("Unauthorized") || text(&after.stderr).contains("logged in"),
        "{}",
        text(&after.stderr)
    );

    // A Pod that does not exist cannot be bound; a duration is a number.
    let path = "/api/v1/namespaces/default/serviceaccounts/robot/token";
    let missing = m.kubectl_output(
        &["create", "--raw", path, "-f", "-"],
        Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"nope"}}}"#),
    );
    assert!(
        text(&missing.stderr).contains("pods \"nope\" not found"),
        "{}",
        text(&missing.stderr)
    );
    let word = m.kubectl_output(
        &["create", "--raw", path, "-f", "-"],
        Some(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":"600"}}"#),
    );
    assert!(
        text(&word.stderr).contains("spec.expirationSeconds"),
        "{}",
        text(&word.stderr)
    );
}

#[test]
fn names_componentstatuses_and_field_selectors_as_kube_apiserver_has_them() {
    let m = Management::up();
    // A Role's name may be any path segment, and is read and deleted by it.
    let name = "lecture-seule-équipe";
    m.kubectl(&[
        "create",
        "role",
        name,
        "--verb=get",
        "--resource=configmaps",
    ]);
    assert_eq!(
        m.kubectl(&["get", "role", name, "-o", "jsonpath={.metadata.name}"]),
        name
    );
    m.kubectl(&["delete", "role", name]);
    assert_eq!(m.kubectl(&["get", "roles", "-o", "name"]), "");

    let statuses = m.kubectl(&["get", "componentstatuses"]);
    assert!(
        statuses.contains("etcd-0") && statuses.contains("Healthy"),
        "{statuses}"
    );
    let refused = m.kubectl_output(&["delete", "componentstatus", "etcd-0"], None);
    assert!(!refused.status.success());

    // A Node without `spec.unschedulable` is schedulable, as a selector on it says.
    m.kubectl_in(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n"),
    );
    m.kubectl_in(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Node\nmetadata:\n  name: n2\nspec:\n  unschedulable: true\n"),
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "nodes",
            "--field-selector",
            "spec.unschedulable=false",
            "-o",
            "name"
        ])
        .trim(),
        "node/n1"
    );
    assert_eq!(
        m.kubectl(&[
            "get",
            "nodes",
            "--field-selector",
            "spec.unschedulable=true",
            "-o",
            "name"
        ])
        .trim(),
        "node/n2"
    );
}

#[test]
fn error_bodies_come_in_kube_apiservers_field_order() {
    let m = Management::up();
    m.kubectl(&["create", "configmap", "settings"]);
    // Sent raw (as a client comparing the body's text would see it).
    let state = std::path::Path::new(&m.state()).to_path_buf();
    let script = r#"
import http.client, ssl, sys
host, port, state = sys.argv[1], int(sys.argv[2]), sys.argv[3]
context = ssl.create_default_context(cafile=state + "/ca.crt")
context.check_hostname = False
conn = http.client.HTTPSConnection(host, port, context=context)
token = sys.argv[4]
conn.request("POST", "/api/v1/namespaces/default/configmaps", body='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"}}', headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
print(conn.getresponse().read().decode())
"#;
    m.kubectl(&["create", "serviceaccount", "writer"]);
    m.kubectl(&[
        "create",
        "rolebinding",
        "writer",
        "--clusterrole=edit",
        "--serviceaccount=default:writer",
    ]);
    let token = m.kubectl(&["create", "token", "writer"]);
    let address = m.server().trim_start_matches("https://").to_string();
    let (host, port) = address.rsplit_once(':').unwrap();
    let python = std::env::var("PYTHON_KUBERNETES").unwrap_or_else(|_| "python3".into());
    let out = Command::new(python)
        .args([
            "-c",
            script,
            host,
            port,
            state.to_str().unwrap(),
            token.trim(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"settings\" already exists","reason":"AlreadyExists","details":{"name":"settings","kind":"configmaps"},"code":409}"#
    );
}

#[test]
fn init_with_a_kubeconfig_that_cannot_be_used_starts_nothing_and_switches_nothing() {
    let home = std::env::temp_dir().join(format!("capictl-home-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    let kubeconfig = home.join(".kube/config");
    let broken = |user: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {{server: https://127.0.0.1:1}}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: prod\n  context: {{cluster: prod, user: u}}\ncurrent-context: prod\n"
        )
    };
    for (what, user) in [
        (
            "an exec plugin that fails",
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/false\n      interactiveMode: Never\n",
        ),
        (
            "a client certificate file that is gone",
            "    client-certificate: /nonexistent/u.crt\n    client-key: /nonexistent/u.key\n",
        ),
    ] {
        std::fs::write(&kubeconfig, broken(user)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_capictl"))
            .args(["init", "--infrastructure", "in-memory", "--yes"])
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env_remove("KUBECONFIG")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("nothing was changed"),
            "{what}: {}",
            text(&out.stderr)
        );
        let after: serde_json::Value =
            capictl::yaml::from_str(&std::fs::read_to_string(&kubeconfig).unwrap()).unwrap();
        assert_eq!(
            after["current-context"], "prod",
            "{what}: the current context was switched"
        );
        assert!(
            !home.join("data/capictl/management/state.redb").exists(),
            "{what}: the embedded cluster was started"
        );
    }
    let _ = capictl(&[
        "management",
        "down",
        "--dir",
        home.join("data/capictl/management").to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&home);
}
